import type postgres from 'postgres';

/**
 * PostgreSQL's built-in array types, handed to the driver (its public
 * `types` option) so that it never fetches them itself. postgres.js 3.4
 * fetches the array types on every new connection (`fetch_types`) and
 * leaves that query's failure unhandled: a connection reset while it was
 * being set up (a server stopping, a standby restarting) was an
 * unhandledRejection, which ends a Node process. Guarded by
 * test/db-connection-faults.test.ts.
 *
 * An array parameter is sent as PostgreSQL's array literal; its type comes
 * from the statement (`$1::uuid[]`), which the driver asks the server for.
 * Array columns come back as arrays of what the driver gives for one element.
 */

type Element = string | number | boolean | bigint | Date | Buffer | null | undefined | Element[];

const quote = (text: string) => `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;

function serializeElement(x: Element): string {
  if (x === null || x === undefined) return 'NULL';
  if (Array.isArray(x)) return serializeArray(x);
  if (x instanceof Date) return quote(x.toISOString());
  if (Buffer.isBuffer(x)) return quote(`\\x${x.toString('hex')}`);
  if (typeof x === 'boolean') return x ? 't' : 'f';
  return quote(String(x));
}

function serializeArray(xs: unknown): string {
  if (!Array.isArray(xs)) return String(xs);
  return `{${(xs as Element[]).map(serializeElement).join(',')}}`;
}

/** PostgreSQL's text form of an array (`{1,2}`, `{"a b",NULL}`, `[0:1]={…}`, nested) read with `element` for each value. */
function parseArray(text: string, element: (x: string) => unknown): unknown[] {
  let i = text.startsWith('[') ? text.indexOf('=') + 1 : 0;
  const read = (): unknown[] => {
    const out: unknown[] = [];
    i++; // '{'
    while (text[i] !== '}') {
      if (text[i] === '{') {
        out.push(read());
      } else if (text[i] === '"') {
        let value = '';
        for (i++; text[i] !== '"'; i++) value += text[i] === '\\' ? text[++i] : text[i];
        i++;
        out.push(element(value));
      } else {
        const start = i;
        while (text[i] !== ',' && text[i] !== '}') i++;
        const value = text.slice(start, i);
        out.push(value === 'NULL' ? null : element(value));
      }
      if (text[i] === ',') i++;
    }
    i++; // '}'
    return out;
  };
  return read();
}

const asString = (x: string) => x;
const asNumber = (x: string) => +x;

/** Array type oid → how one element is read: as the driver reads the element type alone (src/types.js of postgres.js). */
const ARRAYS: Record<string, [oid: number, element: (x: string) => unknown]> = {
  bool: [1000, (x) => x === 't'],
  bytea: [1001, (x) => Buffer.from(x.slice(2), 'hex')],
  char: [1002, asString],
  name: [1003, asString],
  int2: [1005, asNumber],
  int4: [1007, asNumber],
  text: [1009, asString],
  xid: [1011, asString],
  bpchar: [1014, asString],
  varchar: [1015, asString],
  int8: [1016, asString],
  float4: [1021, asNumber],
  float8: [1022, asNumber],
  oid: [1028, asNumber],
  timestamp: [1115, (x) => new Date(x)],
  date: [1182, (x) => new Date(x)],
  timestamptz: [1185, (x) => new Date(x)],
  numeric: [1231, asString],
  json: [199, (x) => JSON.parse(x) as unknown],
  jsonb: [3807, (x) => JSON.parse(x) as unknown],
  uuid: [2951, asString],
};

/** For postgres.js's `types` option, with `fetch_types: false`. */
export const ARRAY_TYPES: Record<string, postgres.PostgresType> = Object.fromEntries(
  Object.entries(ARRAYS).map(([name, [oid, element]]) => [`${name}_array`, {
    to: oid, from: [oid], serialize: serializeArray, parse: (text: string) => parseArray(text, element),
  }]),
);
