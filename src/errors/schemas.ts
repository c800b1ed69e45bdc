import { Type } from '@sinclair/typebox';

/**
 * The wire shapes of the catalogue's errors (src/errors/catalogue.ts), as
 * schemas: the routes' response documentation and the OpenAPI document use
 * them. Components are named after their $id.
 */
const ValidationItem = Type.Object({
  type: Type.String(),
  loc: Type.Array(Type.Union([Type.String(), Type.Integer()])),
  msg: Type.String(),
  input: Type.Unknown(),
});
export const ErrorMessage = Type.Object({ detail: Type.String() }, { $id: 'ErrorMessage' });
export const ValidationError = Type.Object({ detail: Type.Array(ValidationItem) }, { $id: 'ValidationError' });
