import type { OpenApiExamples } from '../http/openapi-post.js';

/** Example bodies of the Management API for the OpenAPI document (attached by src/http/openapi-post.ts). */
const TIME = '2026-11-25T09:41:07.123456+00:00';
const ORG_ID = '7d1c4a52-3b0e-4c59-9d51-6f0b8f1a2e33';
const TEAM = {
  id: '3aac677c-557f-40b7-9251-0315c1f48e77', name: 'Acme Health', created_on: TIME, region: 'us', integration_team_id: 'acme-42',
};
const KEY = { id: '0f4b8a1e-9c2d-4e6f-8a7b-5c3d2e1f0a9b', label: 'ci', value: 'hds_Zk3xQ9', team_id: TEAM.id, created_at: TIME };
const WEBHOOK = {
  id: 'b6a0e2c4-1d3f-4a5b-9c8d-7e6f5a4b3c2d', url: 'https://hooks.example.com/health-data', description: 'Production receiver',
  rate_limit: null, disabled: false, filter_types: ['user.created', 'user.deleted'], created_at: TIME, updated_at: TIME,
};
const MESSAGE = {
  id: 'msg_2f0c7e9a4b1d4c3e8f5a6b7c8d9e0f1a', event_type: 'user.created', created_at: TIME, status: 'delivered', attempts: 1,
  last_attempt_at: TIME, last_status_code: 204,
};
const NEXT = 'WyIyMDI2LTExLTI1VDA5OjQxOjA3LjEyMzQ1NiswMDowMCIsIjNhYWM2NzdjLTU1N2YtNDBiNy05MjUxLTAzMTVjMWY0OGU3NyJd.q1Ww0m2hS8XKc3LxNlM9_A';

const TEAM_MISSING = 'Team not found';
const WEBHOOK_MISSING = 'Webhook endpoint not found';
const OTHER_PATH = 'Not Found';

export const managementExamples: OpenApiExamples = {
  byRef: {
    Org: { id: ORG_ID, name: 'Organization', created_on: TIME },
    Team: TEAM,
    TeamList: { teams: [TEAM], next_cursor: NEXT },
    Empty: {},
    TeamApiKey: { ...KEY, value: 'hds_Zk3xQ9mW2pL7vN4rT8yB1cF6hJ0kD5sA3gE9uI2oP7q' },
    TeamApiKeyList: { api_keys: [KEY], next_cursor: null },
    TeamApiKeyRevocation: { success: [KEY.id], failure: [], not_found: ['9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d'] },
    Webhook: WEBHOOK,
    WebhookList: { data: [WEBHOOK], next_cursor: null },
    WebhookHeaders: { headers: { 'x-environment': 'production' }, sensitive: ['authorization'] },
    WebhookSecret: { key: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' },
    WebhookMessage: MESSAGE,
    WebhookMessageList: { data: [MESSAGE], next_cursor: null },
  },
  errorMessageByStatus: {
    'getOrg:404': OTHER_PATH,
    'listTeams:404': OTHER_PATH,
    'createTeam:404': OTHER_PATH,
    'getTeam:404': TEAM_MISSING,
    'patchTeam:404': TEAM_MISSING,
    'deleteTeam:404': TEAM_MISSING,
    'deleteTeam:409': 'The team has users (live or scheduled for deletion): delete them, and wait for the purge, before the team',
    'listTeamApiKeys:404': TEAM_MISSING,
    'createTeamApiKey:404': TEAM_MISSING,
    'deleteTeamApiKeys:404': OTHER_PATH,
    'listWebhooks:404': TEAM_MISSING,
    'createWebhook:404': TEAM_MISSING,
    'getWebhook:404': WEBHOOK_MISSING,
    'patchWebhook:404': WEBHOOK_MISSING,
    'deleteWebhook:404': WEBHOOK_MISSING,
    'getWebhookHeaders:404': WEBHOOK_MISSING,
    'putWebhookHeaders:404': WEBHOOK_MISSING,
    'getWebhookSecret:404': WEBHOOK_MISSING,
    'rotateWebhookSecret:404': WEBHOOK_MISSING,
    'listWebhookMessages:404': WEBHOOK_MISSING,
    'recoverWebhookMessages:404': WEBHOOK_MISSING,
  },
  requestBody: undefined,
  requestBodyByOperation: {
    createTeam: { name: 'Acme Health' },
    patchTeam: { integration_team_id: 'acme-42' },
    createTeamApiKey: { label: 'ci', team_id: TEAM.id },
    createWebhook: { url: WEBHOOK.url, description: WEBHOOK.description, filter_types: WEBHOOK.filter_types },
    patchWebhook: { disabled: true },
    putWebhookHeaders: { headers: { authorization: 'Bearer 9f3c…', 'x-environment': 'production' } },
    rotateWebhookSecret: {},
    recoverWebhookMessages: { since: TIME },
  },
};
