import type { FastifyInstance } from 'fastify';
import { invalid, unsupportedMediaType } from '../errors/catalogue.js';

/** Deeper than any body of the API (theirs are one or two levels), and far below what exhausts the stack. */
export const MAX_JSON_DEPTH = 64;

/** Whether `text` nests arrays and objects deeper than `max` (brackets inside strings do not count). */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) {
      inString = true;
    } else if (c === 123 /* { */ || c === 91 /* [ */) {
      if (++depth > max) return true;
    } else if (c === 125 /* } */ || c === 93 /* ] */) {
      depth--;
    }
  }
  return false;
}

// fatal: bytes that are not UTF-8 (FF, an over-long C0 80, a surrogate encoded as ED A0 80) throw instead of
// becoming U+FFFD, which would store something other than what was sent. A leading byte order mark is dropped.
const utf8 = new TextDecoder('utf-8', { fatal: true });

const CHARSET = /;\s*charset\s*=\s*("[^"]*"|[^;\s]*)/gi;

/** Whether a Content-Type header declares a charset other than UTF-8 (`utf-8`, or its alias `utf8`, in any case, quoted or not). */
function declaresOtherCharset(contentType: string | undefined): boolean {
  for (const [, value] of contentType?.matchAll(CHARSET) ?? []) {
    const name = value!.replace(/^"(.*)"$/, '$1').toLowerCase();
    if (name !== 'utf-8' && name !== 'utf8') return true;
  }
  return false;
}

/** Whether a Content-Encoding header names an encoding (none is decoded here; `identity` is none). */
function isEncoded(contentEncoding: string | undefined): boolean {
  const name = contentEncoding?.trim().toLowerCase();
  return name !== undefined && name !== '' && name !== 'identity';
}

/**
 * JSON bodies, parsed by Fastify's own parser (with its prototype-poisoning
 * checks) once they are known to be what the contract takes:
 * - UTF-8 as sent (a 415 for another declared charset, or any content
 *   encoding: the bytes would be read as something they are not; a 422
 *   for bytes that are not UTF-8);
 * - not nested deeper than MAX_JSON_DEPTH: a body of a few kilobytes
 *   nested thousands deep once exhausted the stack while its error was
 *   being serialised, and answered a 500 in Fastify's shape. It is a 422
 *   in ours, before it is parsed.
 */
export function registerJsonBody(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    if (isEncoded(request.headers['content-encoding']) || declaresOtherCharset(request.headers['content-type'])) {
      return done(unsupportedMediaType(), undefined);
    }
    let text: string;
    try {
      text = utf8.decode(body as Buffer);
    } catch {
      return done(invalid([{ type: 'json_invalid', loc: ['body'], msg: 'JSON decode error: the body is not valid UTF-8', input: null }]), undefined);
    }
    if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
      return done(invalid([{ type: 'json_invalid', loc: ['body'], msg: `JSON decode error: nested deeper than ${MAX_JSON_DEPTH} levels`, input: null }]), undefined);
    }
    parse(request, text, done);
  });
}
