import { Type, type Static } from '@sinclair/typebox';
import { ErrorMessage, ValidationError } from '../errors/schemas.js';
import { DEMO_PROVIDERS } from './connect.js';
import { LARGEST_PAGE } from './queries.js';

const DateTime = Type.String({ format: 'date-time', examples: ['2022-08-04T12:42:45.596792+00:00'] });
const DateOnly = Type.String({ format: 'date', examples: ['1980-03-13'] });
const Uuid = Type.String({ format: 'uuid' });

export const Source = Type.Object({
  name: Type.String({ examples: ['Oura'] }),
  slug: Type.String({ examples: ['oura'] }),
  logo: Type.String({ examples: ['https://storage.example.com/providers/oura.png'] }),
}, { $id: 'Source' });

export const ConnectedSource = Type.Object({
  created_on: DateTime,
  source: Type.Ref(Source),
  provider: Type.Ref(Source, { deprecated: true, description: 'Deprecated copy of `source`, kept for older clients.' }),
}, { $id: 'ConnectedSource' });

export const FallbackTimeZone = Type.Object({
  id: Type.String({ description: 'IANA time zone id', examples: ['Europe/London'] }),
  source_slug: Type.String({ examples: ['manual'] }),
  updated_at: DateTime,
}, { $id: 'FallbackTimeZone' });

export const FallbackBirthDate = Type.Object({
  value: DateOnly,
  source_slug: Type.String({ examples: ['manual'] }),
  updated_at: DateTime,
}, { $id: 'FallbackBirthDate' });

export const User = Type.Object({
  user_id: Uuid,
  team_id: Uuid,
  client_user_id: Type.String(),
  created_on: DateTime,
  connected_sources: Type.Array(Type.Ref(ConnectedSource)),
  fallback_time_zone: Type.Union([Type.Ref(FallbackTimeZone), Type.Null()]),
  fallback_birth_date: Type.Union([Type.Ref(FallbackBirthDate), Type.Null()]),
  ingestion_start: Type.Union([DateOnly, Type.Null()]),
  ingestion_end: Type.Union([DateOnly, Type.Null()]),
}, { $id: 'User' });
export type User = Static<typeof User>;

export const UserList = Type.Object({
  users: Type.Array(Type.Ref(User)),
  total: Type.Integer({ description: "Number of the team's users" }),
  offset: Type.Integer(),
  limit: Type.Integer(),
}, { $id: 'UserList' });

/** Path parameters carry their longest length: a longer value is a 414 (src/users/routes.ts). */
const UuidParam = Type.String({ format: 'uuid', maxLength: 36 });
export const UserIdParams = Type.Object({ user_id: UuidParam });
export const ClientUserIdParams = Type.Object({ client_user_id: Type.String({ minLength: 1, maxLength: 255 }) });

export const ListQuery = Type.Object({
  offset: Type.Integer({ minimum: 0, maximum: 2 ** 53 - 1, default: 0 }),
  limit: Type.Integer({ minimum: 0, maximum: LARGEST_PAGE, default: 100, description: '0 returns no users and the total: a cheap count' }),
});
export type ListQuery = Static<typeof ListQuery>;

const ClientUserId = Type.String({ minLength: 1, maxLength: 255, format: 'client-user-id', examples: ['d734e32e-dd43-4b77-ab56-692524279531'] });
const TimeZoneId = { format: 'time-zone', examples: ['Europe/London'] };
const BirthDate = { format: 'past-date', description: 'YYYY-MM-DD, not in the future', examples: ['1980-03-13'] };
const DayDate = { format: 'date', description: 'YYYY-MM-DD' };

// Unknown body fields are ignored, as the upstream does (newer SDKs may send fields this service does not know).
export const CreateUserBody = Type.Object({
  client_user_id: ClientUserId,
  fallback_time_zone: Type.Optional(Type.String(TimeZoneId)),
  fallback_birth_date: Type.Optional(Type.String(BirthDate)),
  ingestion_start: Type.Optional(Type.String(DayDate)),
  ingestion_end: Type.Optional(Type.String(DayDate)),
});
export type CreateUserBody = Static<typeof CreateUserBody>;

/** A string field that null clears: one JSON Schema type list, so a bad value gets one 422 item, not one per branch. */
const nullable = (options: object) => Type.Optional(Type.Unsafe<string | null>({ type: ['string', 'null'], ...options }));

export const PatchUserBody = Type.Object({
  client_user_id: Type.Optional(ClientUserId),
  fallback_time_zone: nullable(TimeZoneId),
  fallback_birth_date: nullable(BirthDate),
  ingestion_start: nullable(DayDate),
  ingestion_end: nullable(DayDate),
}, { description: 'Every field is optional; null clears a field (client_user_id cannot be cleared). Unknown fields are ignored.' });

export const UndoDeleteQuery = Type.Object({
  user_id: Type.Optional(Uuid),
  client_user_id: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
}, { description: 'Exactly one of the two.' });

export const DeregisterParams = Type.Object({
  user_id: UuidParam,
  provider: Type.String({ minLength: 1, maxLength: 100, description: 'A source slug, such as oura' }),
});

export const SearchQuery = Type.Object({ query_id: Type.String({ minLength: 2, description: 'A user_id or client_user_id' }) });

export const Success = Type.Object({ success: Type.Boolean() }, { $id: 'Success' });

export const ConnectDemoBody = Type.Object({
  user_id: Uuid,
  provider: Type.String({ enum: [...DEMO_PROVIDERS], description: 'The demo source to connect' }),
}, { description: 'Unknown fields are ignored.' });
export const ConnectDemoAnswer = Type.Object({
  success: Type.Boolean(),
  detail: Type.String({ examples: ['Connected user 409d9870-21fb-443a-8daa-c5222659f40e to provider oura'] }),
}, { $id: 'ConnectDemoAnswer' });

export const ConnectedProvider = Type.Object({
  name: Type.String({ examples: ['Oura'] }),
  slug: Type.String({ examples: ['oura'] }),
  logo: Type.String(),
  created_on: DateTime,
  status: Type.String({ examples: ['connected'] }),
  external_user_id: Type.Union([Type.String(), Type.Null()]),
  error_details: Type.Union([Type.Object({}), Type.Null()]),
  resource_availability: Type.Object({}),
}, { $id: 'ConnectedProvider' });
export const ProviderList = Type.Object({ providers: Type.Array(Type.Ref(ConnectedProvider)) }, { $id: 'ProviderList' });

export const TeamMetrics = Type.Object({
  team_id: Uuid,
  number_of_users: Type.Integer({ description: "The team's live users: the list's total" }),
  number_of_connected_sources: Type.Integer(),
  number_of_errored_connected_sources: Type.Integer(),
  number_of_connected_sources_by_week: Type.Array(Type.Object({
    date: Type.String({ format: 'date', description: 'The Monday (UTC) of the week' }),
    value: Type.Integer({ description: 'Connections made that week' }),
    all: Type.Integer({ description: 'Connections made up to the end of that week' }),
  }), { description: 'The last 12 weeks, the current one last; connections of live users' }),
  number_of_ordered_tests: Type.Integer(),
}, { $id: 'TeamMetrics' });

export const ClientUserIdConflict = Type.Object({
  detail: Type.Object({
    error_type: Type.Literal('INVALID_REQUEST'),
    error_message: Type.Literal('Client user id already exists.'),
    user_id: Uuid,
    created_on: DateTime,
  }),
}, { $id: 'ClientUserIdConflict' });

/** Every schema the routes reference by $id, in the order the OpenAPI document lists them. */
export const userSchemas = [
  Source, ConnectedSource, FallbackTimeZone, FallbackBirthDate, User, UserList, ErrorMessage, ValidationError, ClientUserIdConflict,
  Success, ConnectedProvider, ProviderList, TeamMetrics, ConnectDemoAnswer,
];
