import { isStorableText } from '../user-document/rules.js';

/**
 * The first string in `data` (a request's params, query or body, as parsed)
 * that PostgreSQL cannot store as written, with its JSON pointer; undefined
 * when there is none. Bodies are at most 16 KiB and 64 levels deep (src/http/json-body.ts).
 */
export function unstorableTextIn(data: unknown, path = ''): { path: string; value: string } | undefined {
  if (typeof data === 'string') return isStorableText(data) ? undefined : { path, value: data };
  if (typeof data !== 'object' || data === null) return undefined;
  for (const [key, value] of Object.entries(data)) {
    if (!isStorableText(key)) return { path: `${path}/${pointer(key)}`, value: key };
    const found = unstorableTextIn(value, `${path}/${pointer(key)}`);
    if (found) return found;
  }
  return undefined;
}

const pointer = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');
