import { Ajv, type Options } from 'ajv';
import { createRequire } from 'node:module';
import type { FastifySchemaCompiler } from 'fastify';
import { isCalendarDate, isClientUserId, isPastDate, isTimeZone, isUuid } from '../users/rules.js';

// ajv-formats is CommonJS whose module.exports is the plugin function itself.
const addFormats = createRequire(import.meta.url)('ajv-formats') as (ajv: Ajv, formats: string[]) => Ajv;

/** An Ajv with the project's formats. */
export function makeAjv(options: Options): Ajv {
  // verbose: errors carry the offending value, which 422 items echo as `input`.
  const ajv = new Ajv({ allErrors: true, verbose: true, useDefaults: true, removeAdditional: false, strict: false, ...options });
  addFormats(ajv, ['date', 'date-time']);
  ajv.addFormat('uuid', isUuid);
  // Dates as the import checks them (years from 100 on): ajv-formats' `date` takes year 0000, which PostgreSQL refuses.
  ajv.addFormat('date', isCalendarDate);
  ajv.addFormat('time-zone', isTimeZone);
  ajv.addFormat('past-date', isPastDate);
  ajv.addFormat('client-user-id', isClientUserId);
  return ajv;
}

// Path and query values arrive as strings and must be coerced to the schema's
// types; a JSON body must not be (a number is not a valid client_user_id).
const coercing = makeAjv({ coerceTypes: true });
const strict = makeAjv({ coerceTypes: false });

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) =>
  (httpPart === 'body' ? strict : coercing).compile(schema as object);
