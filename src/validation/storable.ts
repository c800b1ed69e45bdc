import { isStorableText } from '../user-document/rules.js';

/**
 * The first string in `data` (a request's params, query or body, as parsed)
 * that PostgreSQL cannot store as written, with its JSON pointer; undefined
 * when there is none. Bodies are at most 16 KiB and 64 levels deep (src/http/json-body.ts).
 */
export function unstorableTextIn(data: unknown): { path: string; value: string } | undefined {
  if (typeof data === 'string') return isStorableText(data) ? undefined : { path: '', value: data };
  if (typeof data !== 'object' || data === null) return undefined;
  // Runs on every validated request: the pointer is built only on the way back from a find.
  for (const key of Object.keys(data)) {
    if (!isStorableText(key)) return { path: `/${pointer(key)}`, value: key };
    const found = unstorableTextIn((data as Record<string, unknown>)[key]);
    if (found) return { path: `/${pointer(key)}${found.path}`, value: found.value };
  }
  return undefined;
}

const pointer = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');
