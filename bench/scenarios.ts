import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { Dataset } from './dataset.js';
import type { PathPlan } from './load-plan.js';

export type Target =
  /** Service throughput at least `min` x the floor's. */
  | { kind: 'floor'; min: number; p99MaxMs?: number }
  /** Service throughput at least `min` x another scenario's (cost independent of offset or team size). */
  | { kind: 'relative'; to: string; min: number }
  | { kind: 'none' };

export interface Scenario {
  id: string;
  title: string;
  /** Status every answer must have; anything else counts as an error. */
  expect: number;
  /** Requests against the service. */
  plan: PathPlan;
  /** The requests whose answers the floor replays (a sample for random plans), and how the floor is driven. */
  captures: { path: string; headers: Record<string, string> }[];
  floorPlan: (paths: string[]) => PathPlan;
  target: Target;
}

export interface Keys {
  biggest: string;
  smallest: string;
}

const KEY_HEADER = 'x-service-api-key';
const SAMPLE = 200;

function sample<T>(items: T[], n: number): T[] {
  return Array.from({ length: Math.min(n, items.length) }, () => items[Math.floor(Math.random() * items.length)]!);
}

export function buildScenarios(dataset: Dataset, keys: Keys): Scenario[] {
  const big = { [KEY_HEADER]: keys.biggest };
  const small = { [KEY_HEADER]: keys.smallest };
  const n = dataset.biggest.users;
  // The deepest full page (the team's last 100 users): the real last page may hold only a few users,
  // which would flatter the comparison with the first page.
  const maxOffset = Math.max(n - 100, 0);
  const fixed = (path: string, headers: Record<string, string>) => ({
    plan: { kind: 'fixed', requests: [{ path, headers }] } as PathPlan,
    captures: [{ path, headers }],
    floorPlan: () => ({ kind: 'fixed', requests: [{ path, headers }] }) as PathPlan,
  });
  const ids = fs.readFileSync(dataset.biggestIdsFile, 'utf8').split('\n').filter((l) => l !== '');
  const userPaths = [...new Set(sample(ids, SAMPLE))].map((id) => `/v2/user/${id}`);
  const offsetPaths = [...new Set(Array.from({ length: SAMPLE / 2 }, () => Math.floor(Math.random() * (maxOffset + 1))))]
    .map((o) => `/v2/user/?limit=100&offset=${o}`);
  const malformed = { [KEY_HEADER]: 'not-a-key' };
  const unknown = { [KEY_HEADER]: `hds_${randomBytes(32).toString('base64url')}` };

  return [
    {
      id: 'get-one', title: 'get one user (random, biggest team)', expect: 200,
      plan: { kind: 'random-line', prefix: '/v2/user/', file: dataset.biggestIdsFile, headers: big },
      captures: userPaths.map((path) => ({ path, headers: big })),
      floorPlan: (paths) => ({ kind: 'random-path', paths, headers: big }),
      target: { kind: 'floor', min: 0.5, p99MaxMs: 10 },
    },
    { id: 'list-first', title: 'list limit=100, first page', expect: 200, ...fixed('/v2/user/?limit=100', big), target: { kind: 'floor', min: 0.3 } },
    {
      id: 'list-random', title: 'list limit=100, random offsets', expect: 200,
      plan: { kind: 'random-offset', prefix: '/v2/user/?limit=100&offset=', maxOffset, headers: big },
      captures: offsetPaths.map((path) => ({ path, headers: big })),
      floorPlan: (paths) => ({ kind: 'random-path', paths, headers: big }),
      // No target of its own in the issue: shown beside the deepest page.
      target: { kind: 'none' },
    },
    {
      id: 'list-last', title: `list limit=100, last 100 users (offset ${maxOffset})`, expect: 200, ...fixed(`/v2/user/?limit=100&offset=${maxOffset}`, big),
      // Paging cost independent of the offset.
      target: { kind: 'relative', to: 'list-first', min: 0.8 },
    },
    { id: 'list-500', title: 'list limit=500, first page', expect: 200, ...fixed('/v2/user/?limit=500', big), target: { kind: 'none' } },
    {
      id: 'unauthorized', title: 'malformed and unknown keys (401)', expect: 401,
      plan: { kind: 'fixed', requests: [{ path: '/v2/user/?limit=100', headers: malformed }, { path: '/v2/user/?limit=100', headers: unknown }] },
      captures: [{ path: '/v2/user/?limit=100', headers: malformed }],
      floorPlan: () => ({ kind: 'fixed', requests: [{ path: '/v2/user/?limit=100', headers: malformed }, { path: '/v2/user/?limit=100', headers: unknown }] }),
      target: { kind: 'floor', min: 0.8 },
    },
    {
      id: 'total-biggest', title: `list limit=1, biggest team (${n} users)`, expect: 200, ...fixed('/v2/user/?limit=1', big),
      // The cost of `total` independent of team size.
      target: { kind: 'relative', to: 'total-smallest', min: 0.8 },
    },
    {
      id: 'total-smallest', title: `list limit=1, smallest team (${dataset.smallest.users} users)`, expect: 200, ...fixed('/v2/user/?limit=1', small),
      target: { kind: 'none' },
    },
  ];
}
