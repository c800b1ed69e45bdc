import { parseArgs } from 'node:util';

/** What one `npm run bench` run does; every flag also has an environment variable (BENCH_*). */
export interface BenchOptions {
  users: number;
  teams: number;
  seed: number;
  /** Seconds per scenario, for the service and again for the floor. */
  duration: number;
  /** The duration is measured in this many alternating rounds of service and floor. */
  rounds: number;
  connections: number;
  /** Worker counts to run the service with, one full pass per count (`--workers 1,2`). */
  workers: number[];
  /** Run the service on the embedded PostgreSQL instead of DATABASE_URL. */
  embedded: boolean;
  /** Keep the database of an earlier run with the same dataset (skips the import). */
  reuse: boolean;
  databaseUrl: string;
  /** Skip the embedded first-start/restart measurement. */
  skipStartup: boolean;
  /** Use dist/ as it is (no `npm run build`). */
  noBuild: boolean;
  /** Only these scenario and check ids (all when empty); `list-after-deletes` stands for every @before-deletes and @after-deletes scenario. */
  only: string[];
  /** Extra environment for the service (`--service-env LOG_LEVEL=warn`), to try a change without editing code. */
  serviceEnv: Record<string, string>;
  /** Write V8 CPU profiles of the service (one per process) next to its log. */
  profile: boolean;
  /** The load generator: wrk when it is installed, else autocannon, unless one is named. */
  loadGenerator: 'auto' | 'wrk' | 'autocannon';
  /** What runs the PostgreSQL anchor: pgbench when it is installed, else the postgres driver, unless one is named. */
  anchor: 'auto' | 'pgbench' | 'driver';
}

const USAGE = `usage: npm run bench -- [options]

  --users N          users in the generated dataset (default 1000000)
  --teams N          teams in the generated dataset (default 20)
  --seed N           generator seed (default 1)
  --duration S       seconds per scenario, against the service and against the floor (default 10)
  --rounds N         measure each scenario in N alternating rounds of service and floor (default 5)
  --connections N    concurrent connections (default 32)
  --workers LIST     run the service with WORKERS=N for each N in the list, e.g. 1,2 (default 1)
  --embedded         run the service on the embedded PostgreSQL (DATA_DIR in bench/.work) instead of DATABASE_URL
  --reuse            reuse the database imported by an earlier run of the same dataset (no import, no import numbers)
  --database-url URL server to create the bench database on (default postgres://postgres@127.0.0.1:5432/hds_bench_u<users>_t<teams>_s<seed>)
  --no-build         use dist/ as it is instead of running npm run build first
  --skip-startup     skip the embedded first start / restart measurement
  --service-env K=V  extra environment for the service (repeatable), e.g. LOG_LEVEL=warn to see what logging costs
  --profile          write V8 CPU profiles of the service (node --cpu-prof) next to its log in bench/.work/logs
  --only IDS         run only these scenarios and checks, e.g. get-one,list-first (the floor too); ids in bench/README.md,
                     also delete-cost, walk, walk-8, and list-after-deletes for every @before-deletes and @after-deletes scenario
  --load-generator G auto (default: wrk when it is on the PATH, else autocannon), wrk or autocannon
  --anchor A         what runs the PostgreSQL anchor of list scenarios: auto (default: pgbench when it is on the PATH,
                     else a loop on the postgres driver), pgbench or driver

Environment: BENCH_USERS, BENCH_TEAMS, BENCH_DURATION, BENCH_ROUNDS, BENCH_CONNECTIONS, BENCH_WORKERS, BENCH_DATABASE_URL, BENCH_LOAD_GENERATOR, BENCH_ANCHOR.`;

export class UsageError extends Error {}

function whole(name: string, raw: string, min: number): number {
  if (!/^\d+$/.test(raw) || Number(raw) < min) throw new UsageError(`${name} must be a whole number >= ${min}, got "${raw}"\n\n${USAGE}`);
  return Number(raw);
}

export function parseOptions(argv: string[], env: Record<string, string | undefined> = process.env): BenchOptions | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        users: { type: 'string', default: env.BENCH_USERS ?? '1000000' },
        teams: { type: 'string', default: env.BENCH_TEAMS ?? '20' },
        seed: { type: 'string', default: '1' },
        duration: { type: 'string', default: env.BENCH_DURATION ?? '10' },
        rounds: { type: 'string', default: env.BENCH_ROUNDS ?? '5' },
        connections: { type: 'string', default: env.BENCH_CONNECTIONS ?? '32' },
        workers: { type: 'string', default: env.BENCH_WORKERS ?? '1' },
        embedded: { type: 'boolean', default: false },
        reuse: { type: 'boolean', default: false },
        'database-url': { type: 'string', default: env.BENCH_DATABASE_URL },
        'skip-startup': { type: 'boolean', default: false },
        'no-build': { type: 'boolean', default: false },
        only: { type: 'string', default: '' },
        'service-env': { type: 'string', multiple: true, default: [] },
        profile: { type: 'boolean', default: false },
        'load-generator': { type: 'string', default: env.BENCH_LOAD_GENERATOR ?? 'auto' },
        anchor: { type: 'string', default: env.BENCH_ANCHOR ?? 'auto' },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
    });
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n\n${USAGE}`);
  }
  const v = parsed.values;
  if (v.help) {
    process.stdout.write(USAGE + '\n');
    return 'help';
  }
  const users = whole('--users', v.users, 1);
  const teams = whole('--teams', v.teams, 1);
  const seed = whole('--seed', v.seed, 0);
  // One database per dataset, so that --reuse finds the import of the same data.
  const databaseUrl = v['database-url'] ?? `postgres://postgres@127.0.0.1:5432/hds_bench_u${users}_t${teams}_s${seed}`;
  try {
    new URL(databaseUrl);
  } catch {
    throw new UsageError(`--database-url is not a URL: ${databaseUrl}`);
  }
  const loadGenerator = v['load-generator'];
  if (loadGenerator !== 'auto' && loadGenerator !== 'wrk' && loadGenerator !== 'autocannon') {
    throw new UsageError(`--load-generator must be auto, wrk or autocannon, got "${loadGenerator}"`);
  }
  const anchor = v.anchor;
  if (anchor !== 'auto' && anchor !== 'pgbench' && anchor !== 'driver') {
    throw new UsageError(`--anchor must be auto, pgbench or driver, got "${anchor}"`);
  }
  const serviceEnv: Record<string, string> = {};
  for (const pair of v['service-env']) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(pair);
    if (!m) throw new UsageError(`--service-env wants NAME=VALUE, got "${pair}"`);
    serviceEnv[m[1]!] = m[2]!;
  }
  return {
    users,
    teams,
    seed,
    duration: whole('--duration', v.duration, 1),
    rounds: whole('--rounds', v.rounds, 1),
    connections: whole('--connections', v.connections, 1),
    workers: v.workers.split(',').map((w) => whole('--workers', w.trim(), 1)),
    embedded: v.embedded,
    reuse: v.reuse,
    databaseUrl,
    skipStartup: v['skip-startup'],
    noBuild: v['no-build'],
    serviceEnv,
    profile: v.profile,
    loadGenerator,
    anchor,
    only: v.only.split(',').map((s) => s.trim()).filter((s) => s !== ''),
  };
}
