import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { TObject } from '@sinclair/typebox';
import { refusal } from '../errors/catalogue.js';

/** Characters as the schemas' maxLength counts them: code points. */
const lengthOf = (value: string) => {
  let n = 0;
  for (const _ of value) n++;
  return n;
};

/**
 * A path parameter longer than any valid value (its schema's maxLength) is a
 * 414 that does not echo it (contract section 6), as the router's refusal of
 * a longer one (src/http/edge-answers.ts), and before the key is checked: its
 * length alone says nothing about any resource. Validation would answer a 422
 * holding it as `input`. Every path parameter of the scope's routes must have
 * a maxLength, and one per name.
 */
export function refuseLongParams(scope: FastifyInstance): void {
  const longest = new Map<string, number>();
  scope.addHook('onRoute', (route) => {
    const properties = (route.schema?.params as TObject | undefined)?.properties ?? {};
    for (const [name, property] of Object.entries(properties)) {
      const max = property.maxLength as number | undefined;
      if (max === undefined || (longest.get(name) ?? max) !== max) throw new Error(`${route.url}: path parameter ${name} needs one maxLength`);
      longest.set(name, max);
    }
  });
  const tooLong = refusal(414);
  scope.addHook('onRequest', (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const params = request.params as Record<string, string>;
    for (const name in params) {
      const max = longest.get(name);
      const value = params[name]!;
      if (max !== undefined && value.length > max && lengthOf(value) > max) return done(tooLong);
    }
    done();
  });
}
