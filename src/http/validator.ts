import type { FastifySchemaCompiler, FastifySchemaValidationError } from 'fastify';
import { makeAjv } from '../validation/ajv.js';
import { unstorableTextIn } from '../validation/storable.js';

// Path and query values arrive as strings and must be coerced to the schema's
// types; a JSON body must not be (a number is not a valid client_user_id).
const coercing = makeAjv({ coerceTypes: true });
const strict = makeAjv({ coerceTypes: false });

type Validate = ((data: unknown) => boolean) & { errors?: FastifySchemaValidationError[] | null };

/**
 * Fastify's schema compiler: each route's schemas are compiled by one of the
 * two Ajv instances above, and every string a request part holds, wherever
 * it is, must be text PostgreSQL can store as written: a NUL or a lone
 * surrogate is a 422 at its place, never sent to the database (where a NUL
 * failed the statement and a surrogate was stored as U+FFFD).
 */
export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  const ajvValidate = (httpPart === 'body' ? strict : coercing).compile(schema as object);
  const validate: Validate = (data) => {
    if (!ajvValidate(data)) {
      validate.errors = ajvValidate.errors as FastifySchemaValidationError[];
      return false;
    }
    const bad = unstorableTextIn(data);
    if (!bad) return true;
    validate.errors = [{
      keyword: 'storable', instancePath: bad.path, schemaPath: '', params: {}, data: bad.value,
      message: 'Value error, text must not contain a NUL character or an unpaired UTF-16 surrogate',
    } as FastifySchemaValidationError];
    return false;
  };
  return validate;
};
