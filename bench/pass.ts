/**
 * One pass of the benchmark for one WORKERS count, in two services:
 *
 * 1. The service as configured: `total` checked (first pass), then the reads
 *    (get-one ... total-smallest, metrics); then the writes: patch,
 *    delete-undo, the delete-cost check, create (last: it adds users), the
 *    deletes of a tenth of the biggest team and the reads again
 *    (@after-deletes, with get-one and list-random again just before the
 *    deletes); then the biggest team is put back as imported
 *    (bench/restore.ts).
 * 2. The service again with its page cache off (PAGE_CACHE_MB=0): the
 *    random pages without cache, then the walks.
 *
 * Each scenario's answers are captured just before it runs (a write's
 * capture writes) and handed to the floor; then the service, the floor and,
 * for list scenarios, the PostgreSQL anchor are measured in alternating
 * rounds.
 */
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { startAnchor, type Anchor, type AnchorTool } from './anchor.js';
import { capture, type CapturedResponse } from './capture.js';
import { flushWrites, markChanging, markImported } from './database.js';
import { distinctSample, readIds, type Dataset } from './dataset.js';
import { startFloor, type Floor } from './floor.js';
import { combineRounds, runLoad, type LoadGenerator } from './load.js';
import type { LoadResult, LoadSpec } from './load-plan.js';
import type { BenchOptions } from './options.js';
import { sampleMemory, type MemorySampler } from './processes.js';
import { judge, num, type Check, type Measured, type PassResult } from './report.js';
import { restoreAfterWrites, saveBeforeWrites } from './restore.js';
import { recountTeams } from '../src/users/recount.js';
import { AFTER_DELETE_IDS, afterDeleteScenarios, BEFORE_DELETE_IDS, beforeDeleteScenarios, NOCACHE_IDS, nocacheScenarios, readScenarios, writeScenarios, type Keys, type Scenario } from './scenarios.js';
import { databaseUrlOf, startService, stopService, type DatabaseTarget, type Service } from './service.js';
import { compareWalks, type WalkTeam } from './walk.js';
import { deleteUsers, measureDeleteCost, TeamClient, undoLeftovers, WRITE_POOL } from './writes.js';
import { runWriteAnchor } from './write-anchor.js';

/** Targets of the issues that are not a scenario's throughput. */
const LIMITS = { serviceRssMb: 200, deleteCostWithin: 0.25, walkToAnchor: 0.5 };

/** Deletes and undos of the first and of the last user, each, for the delete-cost check. */
const DELETE_COST_TIMES = 200;
/** Connections that delete a tenth of the biggest team before the @after-deletes reads. */
const DELETE_CONNECTIONS = 16;
/** Teams walked at once by walk-8. */
const WALK_TEAMS = 8;
/** The reads measured just before and after the deletes of a tenth of the biggest team (`list-after-deletes` selects them all). */
const AROUND_DELETE_IDS = [...BEFORE_DELETE_IDS, ...AFTER_DELETE_IDS];
/** Everything the first service of a pass runs after the reads; any of them selected means the team must be saved and put back. */
const WRITE_IDS = ['patch', 'delete-undo', 'delete-cost', 'create', ...AROUND_DELETE_IDS];

/** What every pass shares. */
export interface BenchContext {
  root: string;
  workDir: string;
  logDir: string;
  o: BenchOptions;
  generator: LoadGenerator;
  target: DatabaseTarget;
  dataset: Dataset;
  keys: Keys;
  markerFile: string;
  checks: Check[];
  say: (msg: string) => void;
  /** A key of this team, issued once per run. */
  keyOf(teamId: string): Promise<string>;
  /** What runs the PostgreSQL anchor: pgbench, or the driver when pgbench is missing (or named). */
  anchorTool: AnchorTool;
}

/** One service of a pass, with what is measured against it. */
interface Phase {
  ctx: BenchContext;
  workers: number;
  /** The service's settings beyond the run's ({} for the service as configured). */
  extraEnv: Record<string, string>;
  service: Service;
  floor: Floor;
  sql: postgres.Sql;
  /** The service's database, for the anchors. */
  databaseUrl: string;
  anchor: Anchor;
  memory: MemorySampler;
  measured: Measured[];
}

/** Is this scenario or check selected (--only; `list-after-deletes` selects every @before-deletes and @after-deletes scenario)? */
function wanted(ctx: BenchContext, id: string): boolean {
  const only = ctx.o.only;
  return only.length === 0 || only.includes(id) || (AROUND_DELETE_IDS.includes(id) && only.includes('list-after-deletes'));
}

const selected = (ctx: BenchContext, scenarios: Scenario[]) => scenarios.filter((s) => wanted(ctx, s.id));

async function checkTotals(ctx: BenchContext, baseUrl: string): Promise<void> {
  const { dataset, keys } = ctx;
  for (const [name, team, key] of [['biggest', dataset.biggest, keys.biggest], ['smallest', dataset.smallest, keys.smallest]] as const) {
    const total = await new TeamClient(baseUrl, key).total();
    ctx.checks.push({ name: `total exact (${name} team)`, value: String(total), target: `= ${team.users} (dataset)`, pass: total === team.users });
  }
}

async function captureAll(phase: Phase, s: Scenario): Promise<CapturedResponse[]> {
  const answers: CapturedResponse[] = [];
  for (const request of s.captures) {
    const answer = await capture(phase.service.baseUrl, request);
    if (answer.status !== s.expect) phase.ctx.say(`warning: ${s.id}: ${request.method ?? 'GET'} ${request.path} answered ${answer.status}, expected ${s.expect}`);
    answers.push(answer);
  }
  return answers;
}

/**
 * The service's side of a round. A delete-undo run stops wherever it is,
 * leaving its last deletes without their undo: they are undone before
 * anything else runs, and its warm-up is a run of its own for that.
 */
async function loadService(phase: Phase, s: Scenario, base: Omit<LoadSpec, 'url' | 'plan' | 'tag'>): Promise<LoadResult> {
  const { ctx } = phase;
  const run = (spec: typeof base) => runLoad(ctx.root, ctx.workDir, ctx.generator, { ...spec, url: phase.service.baseUrl, plan: s.plan });
  if (s.plan.kind !== 'delete-undo') return run(base);
  const settle = async () => {
    const undone = await undoLeftovers(phase.sql, new TeamClient(phase.service.baseUrl, ctx.keys.biggest), ctx.dataset.biggest.teamId);
    if (undone > 0) ctx.say(`  ${s.id}: undid the ${undone} deletions the run left without their undo`);
  };
  if (base.warmup > 0) {
    await run({ ...base, duration: base.warmup, warmup: 0 });
    await settle();
  }
  const result = await run({ ...base, warmup: 0 });
  await settle();
  return result;
}

/** A key of the team, whose id a deletion records. */
async function keyIdOf(sql: postgres.Sql, teamId: string): Promise<string> {
  const [key] = await sql<{ key_id: string }[]>`SELECT key_id FROM api_keys WHERE team_id = ${teamId} AND revoked_at IS NULL ORDER BY created_at DESC LIMIT 1`;
  if (!key) throw new Error(`team ${teamId} has no key for the write anchor`);
  return key.key_id;
}

/** Captures the scenario's answers for the floor, then measures service, floor and anchor in alternating rounds. */
async function measure(phase: Phase, s: Scenario): Promise<void> {
  const { ctx } = phase;
  const { o } = ctx;
  const captured = await captureAll(phase, s);
  await phase.floor.serve(s.id, captured);
  const paths = captured.map((c) => c.url);
  const warmup = o.duration >= 5 ? 2 : 1;
  const rounds: { service: LoadResult[]; floor: LoadResult[]; anchor: LoadResult[] } = { service: [], floor: [], anchor: [] };
  const writeTeam = s.writeAnchor && { ...s.writeAnchor.team, keyId: await keyIdOf(phase.sql, s.writeAnchor.team.teamId) };
  phase.memory.peakSinceLast();
  for (let round = 0; round < o.rounds; round++) {
    // Service, floor and anchor in alternating rounds: the machine's speed drifts (by half, here, within
    // minutes), and a drift between two long runs would show up as a difference between them.
    const base = { connections: s.connections ?? o.connections, duration: o.duration / o.rounds, warmup: round === 0 ? warmup : 0 };
    rounds.service.push(await loadService(phase, s, base));
    rounds.floor.push(await runLoad(ctx.root, ctx.workDir, ctx.generator, { ...base, url: phase.floor.baseUrl, plan: s.floorPlan(paths) }));
    if (s.anchor) rounds.anchor.push(await phase.anchor.run(s.anchor, base.connections, base.duration));
    if (s.writeAnchor && writeTeam) rounds.anchor.push(await runWriteAnchor(phase.databaseUrl, s.writeAnchor.kind, writeTeam, base.connections, base.warmup * 1000, base.duration));
  }
  const service = combineRounds(rounds.service);
  const floor = combineRounds(rounds.floor);
  const anchor = rounds.anchor.length > 0 ? combineRounds(rounds.anchor) : undefined;
  const peakRssMb = phase.memory.peakSinceLast() / 1024;
  ctx.say(`${s.id}: ${num(service.requestsPerSec)} req/s (p99 ${service.p99Ms} ms), floor ${num(floor.requestsPerSec)} req/s` +
    `${anchor ? `, ${s.writeAnchor ? 'its write function without HTTP' : 'PostgreSQL'} ${num(anchor.requestsPerSec)}/s` : ''}, service peak RSS ${peakRssMb.toFixed(0)} MB`);
  for (const [side, r] of [['service', service], ['floor', floor], ['PostgreSQL', anchor]] as const) {
    if (r && r.socketErrors > 0) ctx.say(`  ${side}: ${r.socketErrors} connection errors${r.errorSamples ? `, e.g. ${r.errorSamples.join('; ')}` : ''}`);
  }
  const wrong = Object.entries(service.statuses).filter(([code]) => Number(code) !== s.expect);
  if (wrong.length > 0) ctx.say(`  service: answers other than ${s.expect}: ${wrong.map(([code, n]) => `${n} x ${code}`).join(', ')}`);
  phase.measured.push({ scenario: s, service, floor, ...(anchor && { anchor }), peakRssMb, ...(Object.keys(phase.extraEnv).length > 0 && { serviceEnv: phase.extraEnv }) });
}

/** Starts a service (and its floor, a database connection and the anchor), runs `body` against it, stops everything. */
async function runPhase(ctx: BenchContext, workers: number, extraEnv: Record<string, string>, first: boolean, body: (phase: Phase) => Promise<void>): Promise<{ measured: Measured[]; service: PassResult['services'][number] }> {
  const { root, o } = ctx;
  const envText = Object.entries(extraEnv).map(([k, v]) => `${k}=${v}`).join(' ');
  const name = `workers-${workers}${envText === '' ? '' : `-${envText.replace(/[^A-Za-z0-9]+/g, '-')}`}`;
  const logFile = path.join(ctx.logDir, `service-${name}.log`);
  ctx.say(`starting the service with WORKERS=${workers}${envText === '' ? '' : ` ${envText}`} (log: ${path.relative(root, logFile)})`);
  const profileDir = o.profile ? path.join(ctx.logDir, `profile-${name}`) : undefined;
  const service = await startService({ root, target: ctx.target, logFile, workers, extraEnv: { ...o.serviceEnv, ...extraEnv }, profileDir });
  const memory = sampleMemory(service.child.pid);
  let floor: Floor | undefined;
  let sql: postgres.Sql | undefined;
  let anchor: Anchor | undefined;
  try {
    if (first) await checkTotals(ctx, service.baseUrl);
    floor = await startFloor(root);
    const url = await databaseUrlOf(ctx.target);
    sql = postgres(url, { max: 4, onnotice: () => {} });
    anchor = await startAnchor(root, ctx.workDir, url, ctx.dataset.biggest.teamId, ctx.anchorTool);
    const phase: Phase = { ctx, workers, extraEnv, service, floor, sql, databaseUrl: url, anchor, memory, measured: [] };
    await body(phase);
    const peaks = memory.stop();
    const memoryPeakMb = peaks.totalKb / 1024;
    const label = [`WORKERS=${workers}`, ...(envText === '' ? [] : [envText])].join(', ');
    ctx.checks.push({ name: `service RSS under load (${label})`, value: `${memoryPeakMb.toFixed(0)} MB`, target: `<= ${LIMITS.serviceRssMb} MB`, pass: memoryPeakMb <= LIMITS.serviceRssMb });
    if (profileDir) ctx.say(`CPU profiles of the service will be in ${path.relative(root, profileDir)} (open them in Chrome DevTools)`);
    return { measured: phase.measured, service: { serviceEnv: extraEnv, logFile: path.relative(root, logFile), memoryPeakMb, memoryLargestProcessMb: peaks.largestKb / 1024 } };
  } finally {
    memory.stop();
    await anchor?.close();
    await sql?.end({ timeout: 5 });
    await floor?.stop();
    await stopService(service);
  }
}

async function deleteCostCheck(phase: Phase, client: TeamClient): Promise<Check> {
  const cost = await measureDeleteCost(client, DELETE_COST_TIMES);
  phase.ctx.say(`delete-cost: median delete ${cost.firstMs.toFixed(2)} ms (first user), ${cost.lastMs.toFixed(2)} ms (last user)`);
  return {
    name: `delete-cost: deleting the first vs the last user of the biggest team (WORKERS=${phase.workers})`,
    value: `median ${cost.firstMs.toFixed(2)} ms first, ${cost.lastMs.toFixed(2)} ms last (${cost.ratio.toFixed(3)}x), ${cost.times} each${cost.errors > 0 ? `; ${cost.errors} errors` : ''}`,
    target: `last within ±${LIMITS.deleteCostWithin * 100}% of first, no errors`,
    pass: Math.abs(cost.ratio - 1) <= LIMITS.deleteCostWithin && cost.errors === 0,
    details: { ...cost },
  };
}

/** Runs the @before-deletes reads, deletes a tenth of the biggest team through the API, then runs the @after-deletes reads. */
async function aroundDeletes(phase: Phase, client: TeamClient, datasetIds: string[], doomed: string[]): Promise<void> {
  const { ctx } = phase;
  const before = await client.total();
  if (before === undefined) throw new Error('the biggest team\'s list answers no total before the deletes');
  // Every user of the dataset is live here (the writes undid their deletes); the users create added are not in the file.
  const created = before - datasetIds.length;
  // Both sides start with the writes before them on disk (the write scenarios' before, the deletes' after): left
  // alone, the checkpointer and the kernel wrote the deletes' pages back during the reads after them only.
  await flushWrites(ctx.target, ctx.say);
  for (const s of selected(ctx, beforeDeleteScenarios(ctx.dataset, ctx.keys, { users: before, idsFile: ctx.dataset.biggestIdsFile, created }))) await measure(phase, s);
  ctx.say(`deleting ${num(doomed.length)} users of the biggest team (a tenth) through the API, ${DELETE_CONNECTIONS} connections`);
  const deleted = await deleteUsers(client, doomed, DELETE_CONNECTIONS);
  const after = await client.total();
  const expected = before - doomed.length;
  ctx.checks.push({
    name: `list-after-deletes: a tenth of the biggest team deleted (WORKERS=${phase.workers})`,
    value: `${num(doomed.length)} DELETEs in ${deleted.seconds.toFixed(1)} s (${num(doomed.length / deleted.seconds)}/s, ${DELETE_CONNECTIONS} connections), ${deleted.errors} errors; total ${before} -> ${after}`,
    target: `every DELETE 200, total ${expected}`,
    pass: deleted.errors === 0 && after === expected,
    details: { before, after, deleted: doomed.length, ...deleted },
  });
  if (after === undefined) throw new Error('the biggest team\'s list answers no total after the deletes');
  await flushWrites(ctx.target, ctx.say);
  const gone = new Set(doomed);
  const idsFile = path.join(ctx.workDir, `live-ids-${process.pid}.txt`);
  fs.writeFileSync(idsFile, datasetIds.filter((id) => !gone.has(id)).join('\n') + '\n');
  try {
    for (const s of selected(ctx, afterDeleteScenarios(ctx.dataset, ctx.keys, { users: after, idsFile, created }))) await measure(phase, s);
  } finally {
    fs.rmSync(idsFile, { force: true });
  }
}

/** The biggest team's state as the service kept it through the writes, recounted (`hds check`) before it is put back. */
async function consistencyCheck(phase: Phase): Promise<Check> {
  const check = { name: `team state right after the writes (WORKERS=${phase.workers})`, target: 'equal to a recount of the team\'s users (hds check)' };
  try {
    const { drifts } = await recountTeams(phase.sql, [phase.ctx.dataset.biggest.teamId]);
    const value = drifts.length === 0 ? 'as recounted' : drifts.map((d) => `${d.what}: kept ${d.kept}, counted ${d.counted}`).join('; ');
    return { ...check, value, pass: drifts.length === 0 };
  } catch (err) {
    // Never in the way of putting the team back.
    return { ...check, value: `could not recount: ${(err as Error).message}`, pass: false };
  }
}

/** The users the writes touch: `pool` for patch and delete-undo (also as an id file), `doomed` for the after-deletes step. */
interface WriteUsers {
  datasetIds: string[];
  pool: { file: string; ids: string[] };
  doomed: string[];
}

/**
 * Saves what the writes may change, runs them, and puts the biggest team
 * back as imported (bench/restore.ts), also when a write scenario failed.
 * The --reuse marker is removed meanwhile and written again only once the
 * team is back and checked.
 */
async function withWrites(phase: Phase, body: (users: WriteUsers) => Promise<void>): Promise<void> {
  const { ctx } = phase;
  const team = { teamId: ctx.dataset.biggest.teamId, users: ctx.dataset.biggest.users };
  const datasetIds = readIds(ctx.dataset.biggestIdsFile);
  const pool = { file: path.join(ctx.workDir, `write-pool-${process.pid}.txt`), ids: distinctSample(datasetIds, WRITE_POOL) };
  const doomed = AROUND_DELETE_IDS.some((id) => wanted(ctx, id)) ? distinctSample(datasetIds, Math.floor(datasetIds.length / 10)) : [];
  markChanging(ctx.markerFile);
  await saveBeforeWrites(phase.sql, team, [...pool.ids, ...doomed]);
  const check = { name: `writes undone, biggest team as imported (WORKERS=${phase.workers})`, target: 'equal to the saved rows (--reuse stays valid)' };
  let failed = true;
  try {
    fs.writeFileSync(pool.file, pool.ids.join('\n') + '\n');
    await body({ datasetIds, pool, doomed });
    failed = false;
  } finally {
    fs.rmSync(pool.file, { force: true });
    ctx.checks.push(await consistencyCheck(phase));
    ctx.say('putting the biggest team back as imported (saved rows back, created users removed, CLUSTER, VACUUM)');
    const started = performance.now();
    try {
      await restoreAfterWrites(phase.sql, team);
      // Its pages on disk before the next scenario (or run) is measured, as after an import.
      await flushWrites(ctx.target, ctx.say);
      markImported(ctx.root, ctx.markerFile, ctx.dataset);
      ctx.checks.push({ ...check, value: `checked, in ${((performance.now() - started) / 1000).toFixed(1)} s`, pass: true });
    } catch (err) {
      ctx.checks.push({ ...check, value: (err as Error).message, pass: false });
      // When a write scenario failed, its error is the one thrown; this one is in the checks.
      if (!failed) ctx.say(`could not put the biggest team back (the next --reuse imports again): ${(err as Error).message}`);
    }
  }
}

/** The first service's work: the reads, then the writes (the team saved before and put back after). */
async function mainPhase(phase: Phase): Promise<void> {
  const { ctx } = phase;
  const { dataset, keys } = ctx;
  for (const s of selected(ctx, readScenarios(dataset, keys, { users: dataset.biggest.users, idsFile: dataset.biggestIdsFile, created: 0 }))) await measure(phase, s);
  if (!WRITE_IDS.some((id) => wanted(ctx, id))) return;
  await withWrites(phase, async ({ datasetIds, pool, doomed }) => {
    const client = new TeamClient(phase.service.baseUrl, keys.biggest);
    const prefix = `bench-${randomBytes(4).toString('hex')}-`;
    const [patch, deleteUndo, create] = writeScenarios(keys, ctx.dataset.biggest.teamId, pool.file, prefix);
    for (const s of selected(ctx, [patch!, deleteUndo!])) await measure(phase, s);
    if (wanted(ctx, 'delete-cost')) ctx.checks.push(await deleteCostCheck(phase, client));
    // Create after every check of the dataset's total: it adds users to the team.
    for (const s of selected(ctx, [create!])) await measure(phase, s);
    if (doomed.length > 0) await aroundDeletes(phase, client, datasetIds, doomed);
  });
}

async function walkCheck(phase: Phase, id: string, what: string, teams: WalkTeam[], min?: number): Promise<Check> {
  const { ctx } = phase;
  // Service and PostgreSQL in turns, ABBA when there are two: a walk of a big team is long, and each is read whole.
  const cmp = await compareWalks(phase.service.baseUrl, phase.anchor, teams, Math.min(ctx.o.rounds, 2));
  const errors = cmp.service.errors + cmp.postgres.errors;
  ctx.say(`${id}: ${num(cmp.service.usersPerSec)} users/s, PostgreSQL ${num(cmp.postgres.usersPerSec)} users/s${errors > 0 ? `, ${errors} errors` : ''}`);
  return {
    name: `${id}: ${what}, pages of 500, page cache off (WORKERS=${phase.workers})`,
    value: `${num(cmp.service.usersPerSec)} users/s; PostgreSQL ${num(cmp.postgres.usersPerSec)} users/s (${cmp.ratio.toFixed(3)}x)${errors > 0 ? `; ${errors} errors` : ''}`,
    target: min === undefined ? 'no errors (reported)' : `>= ${min}x PostgreSQL, no errors`,
    pass: errors === 0 && (min === undefined || cmp.ratio >= min),
    details: { ...cmp, teams: teams.map((t) => ({ teamId: t.teamId, users: t.users })) },
  };
}

/** The second service's work (page cache off): random pages, then the walks. */
async function nocachePhase(phase: Phase): Promise<void> {
  const { ctx } = phase;
  const { dataset, keys } = ctx;
  for (const s of selected(ctx, nocacheScenarios(dataset, keys))) await measure(phase, s);
  const walkTeam = async (t: { teamId: string; users: number }): Promise<WalkTeam> => ({ ...t, key: await ctx.keyOf(t.teamId) });
  if (wanted(ctx, 'walk')) ctx.checks.push(await walkCheck(phase, 'walk', 'one client, the biggest team', [await walkTeam(dataset.biggest)], LIMITS.walkToAnchor));
  if (wanted(ctx, 'walk-8')) {
    const teams: WalkTeam[] = [];
    // One after the other: each key is a CLI process.
    for (const t of dataset.teams.slice(0, WALK_TEAMS)) teams.push(await walkTeam(t));
    ctx.checks.push(await walkCheck(phase, 'walk-8', `${teams.length} clients, each its own team (the ${teams.length} biggest)`, teams));
  }
}

/** What the page-cache-off service runs (its ids, for --only). */
const NOCACHE_PHASE_IDS = [...NOCACHE_IDS, 'walk', 'walk-8'];

export async function runPass(ctx: BenchContext, workers: number, first: boolean): Promise<PassResult> {
  const onlyNocache = ctx.o.only.length > 0 && ctx.o.only.every((id) => NOCACHE_PHASE_IDS.includes(id));
  const phases: Awaited<ReturnType<typeof runPhase>>[] = [];
  if (!onlyNocache) phases.push(await runPhase(ctx, workers, {}, first, mainPhase));
  if (NOCACHE_PHASE_IDS.some((id) => wanted(ctx, id))) {
    phases.push(await runPhase(ctx, workers, { PAGE_CACHE_MB: '0' }, first && phases.length === 0, nocachePhase));
  }
  const services = phases.map((p) => p.service);
  return {
    workers,
    memoryPeakMb: Math.max(...services.map((s) => s.memoryPeakMb)),
    memoryLargestProcessMb: Math.max(...services.map((s) => s.memoryLargestProcessMb)),
    logFile: services[0]!.logFile,
    services,
    scenarios: judge(phases.flatMap((p) => p.measured)),
  };
}
