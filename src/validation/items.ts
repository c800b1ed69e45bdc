import type { FastifySchemaValidationError } from 'fastify';
import type { ValidationItem } from '../errors/catalogue.js';
import { isCalendarDate } from '../user-document/rules.js';

/**
 * Problems with a request's values as the 422 items of the error catalogue
 * (FastAPI/pydantic's shape: type, loc, msg, input).
 */
const LOCATION: Record<string, string> = { body: 'body', querystring: 'query', params: 'path', headers: 'header' };

/** Ajv (verbose) errors to FastAPI/pydantic-style items: type, loc, msg, input. */
export function toValidationItems(context: string, errors: FastifySchemaValidationError[]): ValidationItem[] {
  const where = LOCATION[context] ?? context;
  return errors.map((e) => {
    const err = e as FastifySchemaValidationError & { data?: unknown; parentSchema?: { description?: string } };
    const path = err.instancePath.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    const params = err.params as Record<string, unknown>;
    const loc = [where, ...path];
    const input = err.data;
    switch (err.keyword) {
      case 'required':
        return { type: 'missing', loc: [...loc, String(params.missingProperty)], msg: 'Field required', input };
      case 'additionalProperties':
        return { type: 'extra_forbidden', loc: [...loc, String(params.additionalProperty)], msg: 'Extra inputs are not permitted', input: (input as Record<string, unknown>)?.[String(params.additionalProperty)] };
      case 'type': {
        // A nullable field ({type: ['string', 'null']}) is named by what it holds when set.
        const type = String(params.type).split(',')[0];
        if (type === 'integer') return { type: 'int_parsing', loc, msg: 'Input should be a valid integer', input };
        if (type === 'object' && loc.length === 1) return notAnObject(input);
        return { type: `${type}_type`, loc, msg: `Input should be a valid ${type}`, input };
      }
      case 'minimum':
        return { type: 'greater_than_equal', loc, msg: `Input should be greater than or equal to ${params.limit}`, input };
      case 'maximum':
        return { type: 'less_than_equal', loc, msg: `Input should be less than or equal to ${params.limit}`, input };
      case 'minLength':
        return { type: 'string_too_short', loc, msg: `String should have at least ${params.limit} character${params.limit === 1 ? '' : 's'}`, input };
      case 'maxLength':
        return { type: 'string_too_long', loc, msg: `String should have at most ${params.limit} characters`, input };
      case 'format':
        return formatItem(String(params.format), loc, input);
      case 'enum':
        return { type: 'enum', loc, msg: `Input should be ${alternatives(params.allowedValues as unknown[])}`, input };
      case 'minItems':
        return { type: 'too_short', loc, msg: `List should have at least ${plural(params.limit, 'item')} after validation, not ${(input as unknown[]).length}`, input };
      case 'maxItems':
        return { type: 'too_long', loc, msg: `List should have at most ${plural(params.limit, 'item')} after validation, not ${(input as unknown[]).length}`, input };
      case 'uniqueItems':
        return { type: 'value_error', loc, msg: 'Value error, the list must not hold the same item twice', input };
      case 'maxProperties':
        return { type: 'value_error', loc, msg: `Value error, at most ${plural(params.limit, 'entry', 'entries')}`, input: null };
      default:
        return { type: 'value_error', loc, msg: err.message ?? 'Invalid value', input };
    }
  });
}

/** `'a'`, `'a' or 'b'`, `'a', 'b' or 'c'`: pydantic's wording of an enum's values. */
function alternatives(values: unknown[]): string {
  const quoted = values.map((v) => `'${String(v)}'`);
  return quoted.length < 2 ? quoted.join('') : `${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)}`;
}

const plural = (n: unknown, one: string, many = `${one}s`) => `${String(n)} ${n === 1 ? one : many}`;

const NOT_A_DATE: [string, string] = ['date_from_datetime_parsing', 'Input should be a valid date in the format YYYY-MM-DD'];

/** Each format's item, worded as the upstream (pydantic) words the same problem. */
const FORMAT_MESSAGES: Record<string, (input: unknown) => [type: string, msg: string]> = {
  uuid: () => ['uuid_parsing', 'Input should be a valid UUID'],
  date: () => NOT_A_DATE,
  'past-date': (input) => (typeof input === 'string' && isCalendarDate(input) ? ['date_past', 'Date should be in the past'] : NOT_A_DATE),
  'time-zone': (input) => ['value_error', `Value error, Invalid IANA time zone: ${String(input)}`],
  'client-user-id': () => ['value_error', 'Value error, client_user_id must have no control characters and must not be an e-mail address or phone number'],
};

function formatItem(format: string, loc: string[], input: unknown): ValidationItem {
  const [type, msg] = FORMAT_MESSAGES[format]?.(input) ?? ['value_error', `Input should match format ${format}`];
  return { type, loc, msg, input };
}

/** A body that is not a JSON object, as pydantic words it. */
export function notAnObject(input: unknown): ValidationItem {
  return { type: 'model_attributes_type', loc: ['body'], msg: 'Input should be a valid dictionary or object to extract fields from', input };
}

export interface IntegerBounds { minimum: number; maximum: number }

/**
 * Problems with integer query parameters, judged on the raw text. Ajv's type
 * coercion would take "0x10", "1e1", "+5" or a blank as numbers; the contract
 * wants anything but a plain integer in range refused. Every problem is listed.
 */
export function integerQueryProblems(query: Record<string, unknown>, bounds: Record<string, IntegerBounds>): ValidationItem[] {
  const items: ValidationItem[] = [];
  for (const [name, { minimum, maximum }] of Object.entries(bounds)) {
    const input = query[name];
    if (input === undefined) continue;
    const loc = ['query', name];
    if (typeof input !== 'string' || !/^-?\d{1,20}$/.test(input)) {
      items.push({ type: 'int_parsing', loc, msg: 'Input should be a valid integer', input });
      continue;
    }
    const value = Number(input);
    if (value < minimum) items.push({ type: 'greater_than_equal', loc, msg: `Input should be greater than or equal to ${minimum}`, input });
    else if (value > maximum) items.push({ type: 'less_than_equal', loc, msg: `Input should be less than or equal to ${maximum}`, input });
  }
  return items;
}
