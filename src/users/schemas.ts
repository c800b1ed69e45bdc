import { Type, type Static } from '@sinclair/typebox';

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

export const UserIdParams = Type.Object({ user_id: Uuid });
export const ClientUserIdParams = Type.Object({ client_user_id: Type.String({ minLength: 1, maxLength: 255 }) });

export const ListQuery = Type.Object({
  offset: Type.Integer({ minimum: 0, maximum: 2 ** 53 - 1, default: 0 }),
  limit: Type.Integer({ minimum: 1, maximum: 500, default: 100 }),
});
export type ListQuery = Static<typeof ListQuery>;

export const CreateUserBody = Type.Object({
  client_user_id: Type.String({ minLength: 1, maxLength: 255, format: 'client-user-id', examples: ['d734e32e-dd43-4b77-ab56-692524279531'] }),
  fallback_time_zone: Type.Optional(Type.String({ format: 'time-zone', examples: ['Europe/London'] })),
  fallback_birth_date: Type.Optional(Type.String({ format: 'past-date', examples: ['1980-03-13'] })),
  ingestion_start: Type.Optional(Type.String({ format: 'date' })),
  ingestion_end: Type.Optional(Type.String({ format: 'date' })),
}, { additionalProperties: false });
export type CreateUserBody = Static<typeof CreateUserBody>;

export const CreatedUser = Type.Object({ user_id: Uuid, client_user_id: Type.String() });

const ValidationItem = Type.Object({
  type: Type.String(),
  loc: Type.Array(Type.Union([Type.String(), Type.Integer()])),
  msg: Type.String(),
  input: Type.Unknown(),
});
export const ErrorMessage = Type.Object({ detail: Type.String() }, { $id: 'ErrorMessage' });
export const ValidationError = Type.Object({ detail: Type.Array(ValidationItem) }, { $id: 'ValidationError' });
export const ClientUserIdConflict = Type.Object({
  detail: Type.Object({
    error_type: Type.Literal('client_user_id_already_exists'),
    error_message: Type.String(),
    user_id: Uuid,
    created_on: DateTime,
  }),
}, { $id: 'ClientUserIdConflict' });

export const sharedSchemas = [Source, ConnectedSource, FallbackTimeZone, FallbackBirthDate, User, UserList, ErrorMessage, ValidationError, ClientUserIdConflict];
