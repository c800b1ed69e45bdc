import type { FastifyInstance } from 'fastify';
import { invalid } from '../errors/catalogue.js';

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

/**
 * JSON bodies, parsed by Fastify's own parser (with its prototype-poisoning
 * checks) once they are known not to nest deeper than MAX_JSON_DEPTH: a
 * body of a few kilobytes nested thousands deep once exhausted the stack
 * while its error was being serialised, and answered a 500 in Fastify's
 * shape. It is a 422 in ours, before it is parsed.
 */
export function registerJsonBody(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string;
    if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
      return done(invalid([{ type: 'json_invalid', loc: ['body'], msg: `JSON decode error: nested deeper than ${MAX_JSON_DEPTH} levels`, input: null }]), undefined);
    }
    parse(request, text, done);
  });
}
