import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Sql } from '../db/client.js';
import type { KeyVerifier } from '../auth/key-verifier.js';
import type { TeamLimitHook } from '../http/rate-limit.js';
import { ErrorMessage, ValidationError } from '../errors/schemas.js';
import type { UserReads } from './reads.js';

/** What the user routes are built on; the read and write route modules take it whole. */
export interface UserRoutesDeps {
  /** Every read of users (src/users/reads.ts). */
  reads: UserReads;
  /** Pool for writes: the primary. */
  write: Sql;
  verifier: KeyVerifier;
  /** The per-team rate limit (src/http/rate-limit.ts), checked once the key is verified. */
  limitTeam: TeamLimitHook;
  /** DELETION_GRACE: a `user.deleted` event says when its purge will run. */
  deletionGraceMs: number;
}

/** Either header carries the key (src/auth/authenticate.ts). */
export const SECURITY: Record<string, string[]>[] = [{ apiKey: [] }, { upstreamApiKey: [] }];

/** Answers every user route may give. */
export const COMMON_ERRORS = {
  401: Type.Ref(ErrorMessage, { description: 'Missing, malformed, unknown, revoked or expired key' }),
  422: Type.Ref(ValidationError, { description: 'Invalid path, query or body value' }),
  429: Type.Ref(ErrorMessage, { description: 'Rate limit exceeded' }),
  503: Type.Ref(ErrorMessage, { description: 'Database unavailable or shutting down' }),
};

/** A 404 of a route, described. */
export const notFoundAnswer = (description: string) => ({ 404: Type.Ref(ErrorMessage, { description }) });

/** Sends JSON bytes as they are: stored documents go out without a parse and a re-serialisation. */
export function sendJson(reply: FastifyReply, json: Buffer | string): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(json);
}

const LIST_START = Buffer.from('[');
const LIST_END = Buffer.from(']');
const COMMA = Buffer.from(',');

/** Sends stored user documents as a JSON array, and audits their ids on the request's log line. */
export function sendUsers(request: FastifyRequest, reply: FastifyReply, users: { user_id: string; doc: Buffer }[]): FastifyReply {
  if (users.length > 0) request.auditedUserIds = JSON.stringify(users.map((u) => u.user_id));
  return sendJson(reply, Buffer.concat([LIST_START, ...users.flatMap((u, i) => (i === 0 ? [u.doc] : [COMMA, u.doc])), LIST_END]));
}

/** Sends one stored user document, and audits its id on the request's log line. */
export function sendUser(request: FastifyRequest, reply: FastifyReply, user: { user_id: string; doc: Buffer | string }): FastifyReply {
  request.auditedUserIds = JSON.stringify([user.user_id]);
  return sendJson(reply, user.doc);
}
