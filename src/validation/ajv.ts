import { Ajv, type Options } from 'ajv';
import { createRequire } from 'node:module';
import { isCalendarDate, isClientUserId, isPastDate, isTimeZone, isUuid } from '../user-document/rules.js';

// ajv-formats is CommonJS whose module.exports is the plugin function itself.
const addFormats = createRequire(import.meta.url)('ajv-formats') as (ajv: Ajv, formats: string[]) => Ajv;

/**
 * An Ajv with the project's formats, the stored user document's value rules
 * (src/user-document/rules.ts): the routes' validator (src/http/validator.ts)
 * and the import's line check (src/import/line.ts) both build theirs here.
 * The 422 messages of each format are in ./items.ts.
 */
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
