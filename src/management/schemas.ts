import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { ENVIRONMENTS, REGIONS } from '../config.js';
import { EVENT_TYPES } from './event-types.js';
import { MESSAGE_STATUSES } from './message-store.js';

/**
 * The Management API's wire shapes (contract section 11), as TypeBox
 * schemas: they validate requests, and the OpenAPI document names its
 * components after their $id.
 */

const DateTime = Type.String({ format: 'date-time', examples: ['2026-11-25T09:41:07.123456+00:00'] });
const Uuid = Type.String({ format: 'uuid' });
/** A value that may also be null: one JSON Schema type list, so that a bad value gets one 422 item, not one per branch. */
const nullable = <T extends TSchema>(schema: T, options: object = {}) =>
  Type.Unsafe<Static<T> | null>({ ...(JSON.parse(JSON.stringify(schema)) as object), type: [schema.type as string, 'null'], ...options });

/** Path parameters carry their longest length: a longer value is a 414 that is not echoed (src/http/long-params.ts). */
const UuidParam = Type.String({ format: 'uuid', maxLength: 36 });
const EnvParam = Type.String({ enum: [...ENVIRONMENTS], maxLength: 10, description: "The deployment's environment (ENVIRONMENT); the other one is a 404" });
const RegionParam = Type.String({ enum: [...REGIONS], maxLength: 10, description: "The deployment's region (REGION); the other one is a 404" });

export const OrgParams = Type.Object({ org_id: UuidParam });
export const TeamParams = Type.Object({ org_id: UuidParam, team_id: UuidParam });
export const KeysParams = Type.Object({ org_id: UuidParam, env: EnvParam, region: RegionParam });
export const WebhooksParams = Type.Object({ org_id: UuidParam, team_id: UuidParam, environment: EnvParam });
export const WebhookParams = Type.Object({ org_id: UuidParam, team_id: UuidParam, environment: EnvParam, webhook_id: UuidParam });

export const LARGEST_PAGE = 250;
const Cursor = Type.String({ maxLength: 512, description: 'The `next_cursor` of the previous page; leave it out for the first page' });
const Limit = Type.Integer({ minimum: 1, maximum: LARGEST_PAGE, default: 50, description: 'Items per page' });

export const TeamListQuery = Type.Object({
  search_query: Type.Optional(Type.String({ minLength: 1, maxLength: 255, description: 'Teams whose name holds it (any case), or whose id is it' })),
  next_cursor: Type.Optional(Cursor),
  limit: Limit,
});
export const KeyListQuery = Type.Object({
  team_id: Type.Optional(Type.String({ format: 'uuid', description: "One team's keys; every team's when left out" })),
  next_cursor: Type.Optional(Cursor),
  limit: Limit,
});
export const MAX_KEYS_AT_ONCE = 100;
export const KeyDeleteQuery = Type.Object({
  api_key_id: Type.Array(Type.String({ format: 'uuid' }), {
    minItems: 1, maxItems: MAX_KEYS_AT_ONCE, description: `The keys to revoke: the parameter repeated, up to ${MAX_KEYS_AT_ONCE}`,
  }),
});
export const WebhookListQuery = Type.Object({ next_cursor: Type.Optional(Cursor), limit: Limit });

export const Org = Type.Object({ id: Uuid, name: Type.String(), created_on: DateTime }, { $id: 'Org' });

export const Team = Type.Object({
  id: Uuid,
  name: Type.String(),
  created_on: DateTime,
  region: Type.String({ enum: [...REGIONS] }),
  integration_team_id: nullable(Type.String()),
}, { $id: 'Team' });
export const TeamList = Type.Object({
  teams: Type.Array(Type.Ref(Team)),
  next_cursor: nullable(Type.String(), { description: 'Pass it back as `next_cursor` for the next page; null at the end' }),
}, { $id: 'TeamList' });

const TeamName = Type.String({ minLength: 1, maxLength: 255 });
const IntegrationTeamId = Type.String({ minLength: 1, maxLength: 255, description: "The team's id in your own systems" });
export const CreateTeamBody = Type.Object({
  name: TeamName,
  integration_team_id: Type.Optional(nullable(IntegrationTeamId)),
  region: Type.Optional(Type.String({ enum: [...REGIONS], description: "The deployment's region (REGION); it is the only one" })),
});
export type CreateTeamBody = Static<typeof CreateTeamBody>;
export const PatchTeamBody = Type.Object({
  name: Type.Optional(TeamName),
  integration_team_id: Type.Optional(nullable(IntegrationTeamId)),
});
export type PatchTeamBody = Static<typeof PatchTeamBody>;
export const Empty = Type.Object({}, { $id: 'Empty' });

export const TeamApiKey = Type.Object({
  id: Uuid,
  label: Type.String(),
  value: Type.String({ description: "The whole key when it is created (shown this once); in lists, only the key's visible prefix" }),
  team_id: Uuid,
  created_at: DateTime,
}, { $id: 'TeamApiKey' });
export const TeamApiKeyList = Type.Object({
  api_keys: Type.Array(Type.Ref(TeamApiKey)),
  next_cursor: nullable(Type.String()),
}, { $id: 'TeamApiKeyList' });
export const CreateKeyBody = Type.Object({ label: Type.String({ minLength: 1, maxLength: 255 }), team_id: Uuid });
export const KeyRevocation = Type.Object({
  success: Type.Array(Uuid, { description: 'Revoked now: refused everywhere within a second' }),
  failure: Type.Array(Uuid, { description: 'Could not be revoked (always empty: a revocation is one statement, and a failure fails the request)' }),
  not_found: Type.Array(Uuid, { description: 'No key that works now has this id (unknown, or revoked already)' }),
}, { $id: 'TeamApiKeyRevocation' });

const EventTypes = Type.Unsafe<string[] | null>({
  type: ['array', 'null'], items: { type: 'string', enum: [...EVENT_TYPES] }, minItems: 1, uniqueItems: true,
  description: 'Event types sent to the endpoint; null: every type',
});
const Url = Type.String({ minLength: 1, maxLength: 2048, examples: ['https://hooks.example.com/health-data'] });
const Description = Type.String({ maxLength: 1024 });
const RateLimit = nullable(Type.Integer({ minimum: 1, maximum: 65535 }), { description: 'Messages per second; null: no limit' });

export const Webhook = Type.Object({
  id: Uuid,
  url: Type.String(),
  description: Type.String(),
  rate_limit: nullable(Type.Integer()),
  disabled: Type.Boolean(),
  filter_types: Type.Unsafe<string[] | null>({ type: ['array', 'null'], items: { type: 'string' } }),
  created_at: DateTime,
  updated_at: DateTime,
}, { $id: 'Webhook' });
export const WebhookList = Type.Object({
  data: Type.Array(Type.Ref(Webhook)),
  next_cursor: nullable(Type.String()),
}, { $id: 'WebhookList' });

export const CreateWebhookBody = Type.Object({
  url: Url,
  description: Type.Optional(Description),
  rate_limit: Type.Optional(RateLimit),
  disabled: Type.Optional(Type.Boolean()),
  filter_types: Type.Optional(EventTypes),
  secret: Type.Optional(Type.String({ maxLength: 200, description: 'whsec_ + base64 of 24 to 64 bytes; a new one when left out' })),
});
export type CreateWebhookBody = Static<typeof CreateWebhookBody>;
export const PatchWebhookBody = Type.Object({
  url: Type.Optional(Url),
  description: Type.Optional(Description),
  rate_limit: Type.Optional(RateLimit),
  disabled: Type.Optional(Type.Boolean()),
  filter_types: Type.Optional(EventTypes),
});
export type PatchWebhookBody = Static<typeof PatchWebhookBody>;

export const HeadersBody = Type.Object({
  headers: Type.Record(Type.String(), Type.String(), { maxProperties: 20 }),
});
export const WebhookHeaders = Type.Object({
  headers: Type.Record(Type.String(), Type.String(), { description: 'Custom headers sent with every delivery, but the sensitive ones' }),
  sensitive: Type.Array(Type.String(), { description: 'Names of the headers whose values are not shown: authorization, cookie, and names holding key, secret or token' }),
}, { $id: 'WebhookHeaders' });
export const WebhookSecret = Type.Object({ key: Type.String({ examples: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'] }) }, { $id: 'WebhookSecret' });
export const RotateSecretBody = Type.Object({
  key: Type.Optional(Type.String({ maxLength: 200, description: 'The new secret (whsec_ + base64 of 24 to 64 bytes); a new one when left out' })),
});

export const MessageListQuery = Type.Object({
  status: Type.Optional(Type.String({ enum: [...MESSAGE_STATUSES], description: 'Only the messages in this state' })),
  next_cursor: Type.Optional(Cursor),
  limit: Limit,
});
export const Message = Type.Object({
  id: Type.String({ description: 'The webhook-id (svix-id) of its deliveries: the same on every attempt', examples: ['msg_2f0c7e9a4b1d4c3e8f5a6b7c8d9e0f1a'] }),
  event_type: Type.String({ enum: [...EVENT_TYPES] }),
  created_at: DateTime,
  status: Type.String({ enum: [...MESSAGE_STATUSES], description: 'pending: to be attempted (again); delivered; failed: no retry left' }),
  attempts: Type.Integer({ description: 'Attempts made since the message was created or recovered' }),
  last_attempt_at: nullable(DateTime),
  last_status_code: nullable(Type.Integer(), { description: 'The last answer\'s status; null when none came (a timeout, a refused connection)' }),
}, { $id: 'WebhookMessage' });
export const MessageList = Type.Object({
  data: Type.Array(Type.Ref(Message)),
  next_cursor: nullable(Type.String()),
}, { $id: 'WebhookMessageList' });
export const RecoverBody = Type.Object({
  since: Type.String({ format: 'date-time', description: 'Every failed message created at this time or later is sent again' }),
});

/** The schemas routes reference by $id: added to the app, and components of the OpenAPI document. */
export const managementSchemas = [
  Org, Team, TeamList, Empty, TeamApiKey, TeamApiKeyList, KeyRevocation, Webhook, WebhookList, WebhookHeaders, WebhookSecret,
  Message, MessageList,
];
