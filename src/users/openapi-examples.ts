import type { OpenApiExamples } from '../http/openapi-post.js';

/**
 * Example bodies for the OpenAPI document, taken from the HTTP contract.
 * They are attached to responses by the schema they reference
 * (src/http/openapi-post.ts), so a new route returning a User or an error
 * gets its examples without extra work.
 */
const TIME = '2022-08-04T12:42:45.596792+00:00';
const OURA = { name: 'Oura', slug: 'oura', logo: 'https://storage.example.com/providers/oura.png' };

const USER_EXAMPLE = {
  user_id: '409d9870-21fb-443a-8daa-c5222659f40e',
  team_id: '3aac677c-557f-40b7-9251-0315c1f48e77',
  client_user_id: 'd734e32e-dd43-4b77-ab56-692524279531',
  created_on: TIME,
  connected_sources: [{ created_on: TIME, source: OURA, provider: OURA }],
  fallback_time_zone: { id: 'Europe/London', source_slug: 'manual', updated_at: '2022-09-11T13:45:56+00:00' },
  fallback_birth_date: { value: '1980-03-13', source_slug: 'manual', updated_at: '2022-09-11T13:45:56+00:00' },
  ingestion_start: null,
  ingestion_end: null,
};

/** A response example for each component a response may reference. */
const EXAMPLE_BY_REF: Record<string, unknown> = {
  User: USER_EXAMPLE,
  UserList: { users: [USER_EXAMPLE], total: 1, offset: 0, limit: 100 },
  ValidationError: {
    detail: [{ type: 'less_than_equal', loc: ['query', 'limit'], msg: 'Input should be less than or equal to 500', input: 501 }],
  },
  ClientUserIdConflict: {
    detail: {
      error_type: 'INVALID_REQUEST',
      error_message: 'Client user id already exists.',
      user_id: USER_EXAMPLE.user_id,
      created_on: TIME,
    },
  },
  Success: { success: true },
  ConnectDemoAnswer: { success: true, detail: `Connected user ${USER_EXAMPLE.user_id} to provider oura` },
  ProviderList: {
    providers: [{
      ...OURA, created_on: TIME, status: 'connected', external_user_id: null, error_details: null, resource_availability: {},
    }],
  },
  TeamMetrics: {
    team_id: USER_EXAMPLE.team_id,
    number_of_users: 1,
    number_of_connected_sources: 1,
    number_of_errored_connected_sources: 0,
    number_of_connected_sources_by_week: [{ date: '2022-08-01', value: 1, all: 1 }],
    number_of_ordered_tests: 0,
  },
};

/** ErrorMessage bodies differ by status, and a 404's by route. */
const ERROR_MESSAGE_BY_STATUS: Record<string, string> = {
  400: 'Nothing to patch',
  401: 'Invalid or missing API key',
  404: 'The user does not or no longer exists in this team',
  'getUser:404': 'Not found',
  'resolveUser:404': 'User not found',
  'undoDeleteUser:404': 'No user of this team is scheduled for deletion under this id',
  'connectDemoProvider:404': 'Not found',
  409: 'Client user id already exists',
  413: 'Request body too large',
  415: 'Unsupported Media Type',
  429: 'Rate limit exceeded',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

const CREATE_USER_EXAMPLE = {
  client_user_id: 'd734e32e-dd43-4b77-ab56-692524279531',
  fallback_time_zone: 'Europe/London',
  fallback_birth_date: '1980-03-13',
};

export const userExamples: OpenApiExamples = {
  byRef: EXAMPLE_BY_REF,
  errorMessageByStatus: ERROR_MESSAGE_BY_STATUS,
  requestBody: CREATE_USER_EXAMPLE,
  requestBodyByOperation: { connectDemoProvider: { user_id: USER_EXAMPLE.user_id, provider: 'oura' } },
};
