/**
 * `npm run bench`: the benchmark of issue 3 and of the issues "the whole
 * user resource" and "lists at the speed PostgreSQL reads them". Builds the
 * service, generates and imports the dataset, then for each WORKERS count
 * runs a pass (bench/pass.ts): every scenario against the service and
 * against the floor (a bare server that replays the service's own answers
 * from memory), list scenarios also against PostgreSQL itself, and reports
 * each result as a ratio to them. See `npm run bench -- --help`.
 *
 * Exits non-zero only when the harness itself fails; missed targets are
 * reported, not fatal.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AnchorTool } from './anchor.js';
import { renderChart } from './chart.js';
import { flushWrites, markImported, prepareDatabase } from './database.js';
import { prepareDataset } from './dataset.js';
import { bytesPerUser, runImport, runRawCopy, type ImportResult } from './import.js';
import type { LoadGenerator } from './load.js';
import { parseOptions, UsageError, type BenchOptions } from './options.js';
import { runPass, type BenchContext } from './pass.js';
import { killAllNow, onPath, runToEnd, stopAll } from './processes.js';
import { renderReport, type BenchReport, type Check, type PassResult } from './report.js';
import type { Keys } from './scenarios.js';
import { createKey, type DatabaseTarget } from './service.js';
import { measureStartup, type StartupResult } from './startup.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const say = (msg: string) => process.stderr.write(`bench: ${msg}\n`);

/** Targets of the issue that are not a scenario's throughput (the service's own are in bench/pass.ts). */
const LIMITS = { importUsersPerSec: 50_000, importPeakMb: 300, importCopyRatio: 0.2, firstStartMs: 10_000, restartMs: 2_000 };

function importChecks(result: ImportResult | null): Check[] {
  if (!result) return [];
  return [
    { name: 'import speed', value: `${Math.round(result.usersPerSec).toLocaleString('en')} users/s (${result.seconds.toFixed(1)} s)`, target: `>= ${LIMITS.importUsersPerSec.toLocaleString('en')} users/s`, pass: result.usersPerSec >= LIMITS.importUsersPerSec },
    { name: 'import peak memory', value: `${result.peakRssMb.toFixed(0)} MB`, target: `<= ${LIMITS.importPeakMb} MB`, pass: result.peakRssMb <= LIMITS.importPeakMb },
    ...(result.rawCopy ? [{ name: 'import vs raw COPY', value: `${result.rawCopy.ratio.toFixed(2)}x (COPY of the lines ${result.rawCopy.seconds.toFixed(1)} s)`, target: `>= ${LIMITS.importCopyRatio}x`, pass: result.rawCopy.ratio >= LIMITS.importCopyRatio }] : []),
  ];
}

function startupChecks(result: StartupResult | null): Check[] {
  if (!result) return [];
  return [
    { name: 'embedded first start', value: `${(result.firstStartMs / 1000).toFixed(2)} s`, target: `<= ${LIMITS.firstStartMs / 1000} s`, pass: result.firstStartMs <= LIMITS.firstStartMs },
    { name: 'embedded restart', value: `${(result.restartMs / 1000).toFixed(2)} s`, target: `<= ${LIMITS.restartMs / 1000} s`, pass: result.restartMs <= LIMITS.restartMs },
  ];
}

/** A full run logs about 1 GB at LOG_LEVEL=info (audit lines list every user id returned): keep only the last runs' logs. */
function pruneLogs(dir: string, keep: number): void {
  if (!fs.existsSync(dir)) return;
  const runs = fs.readdirSync(dir).sort();
  for (const old of runs.slice(0, Math.max(0, runs.length - keep))) fs.rmSync(path.join(dir, old), { recursive: true, force: true });
}

function writeResults(report: BenchReport, stamp: string): string[] {
  const dir = path.join(root, 'bench/results');
  fs.mkdirSync(dir, { recursive: true });
  // Latency histograms ([bound, count] pairs) one pair per line, not four.
  const json = JSON.stringify(report, null, 2).replace(/\[\s+([\d.e+-]+),\s+([\d.e+-]+)\s+\]/g, '[$1, $2]') + '\n';
  const svg = renderChart(report);
  const files = ['latest.json', 'latest.svg', `${stamp}.json`, `${stamp}.svg`].map((f) => path.join(dir, f));
  fs.writeFileSync(files[0]!, json);
  fs.writeFileSync(files[1]!, svg);
  fs.writeFileSync(files[2]!, json);
  fs.writeFileSync(files[3]!, svg);
  return files.map((f) => path.relative(root, f));
}

async function bench(o: BenchOptions, argv: string[]): Promise<void> {
  const startedAt = new Date();
  const stamp = startedAt.toISOString().replace(/[:.]/g, '-').replace(/-\d+Z$/, 'Z');
  const workDir = path.join(root, 'bench/.work');
  const logDir = path.join(workDir, 'logs', stamp);
  pruneLogs(path.join(workDir, 'logs'), 3);
  fs.mkdirSync(logDir, { recursive: true });
  const loadAvgAtStart = os.loadavg();

  if (o.noBuild) {
    say('using dist/ as it is (--no-build)');
  } else {
    say('building (npm run build)');
    await runToEnd('npm run build', 'npm', ['run', 'build', '--silent']);
  }

  const dataset = await prepareDataset(root, workDir, o.users, o.teams, o.seed, say);
  const target: DatabaseTarget = o.embedded
    ? { dataDir: path.join(workDir, `embedded-u${o.users}_t${o.teams}_s${o.seed}`) }
    : { databaseUrl: o.databaseUrl };
  const markerFile = path.join(workDir, 'databases', 'databaseUrl' in target ? `${new URL(target.databaseUrl).pathname.slice(1)}.json` : `${path.basename(target.dataDir)}.json`);
  let importResult: ImportResult | null = null;
  if (await prepareDatabase(root, target, dataset, o.reuse, markerFile, say)) {
    // The import starts from the state its anchor does: a just-generated dataset (550 MB a million users)
    // is still being written back, and the import ran about a fifth slower under that write-back.
    await flushWrites(target, say);
    say(`importing ${dataset.users.toLocaleString('en')} users with the CLI`);
    importResult = await runImport(root, target, dataset.file, dataset.users);
    markImported(root, markerFile, dataset);
    say(`import: ${importResult.seconds.toFixed(1)} s, ${Math.round(importResult.usersPerSec)} users/s, peak ${importResult.peakRssMb.toFixed(0)} MB, disk at most ${(importResult.diskPeakMb / 1024).toFixed(2)} GB more (${importResult.summary})`);
    const flushStart = performance.now();
    await flushWrites(target, say);
    say(`import's writes flushed to disk (CHECKPOINT, sync) in ${((performance.now() - flushStart) / 1000).toFixed(1)} s`);
    const perUser = await bytesPerUser(target, dataset.users);
    if (perUser !== undefined) say(`database after the import: ${Math.round(perUser)} bytes per user`);
    importResult.bytesPerUser = perUser;
    // The anchor: PostgreSQL's raw COPY of the same lines into an unlogged one-column table, after the flush (no write-back under it).
    const copy = await runRawCopy(target, dataset.file);
    importResult.rawCopy = { ...copy, ratio: copy.seconds / importResult.seconds };
    say(`raw COPY of the file's lines: ${copy.seconds.toFixed(1)} s (${copy.rows.toLocaleString('en')} rows); import at ${importResult.rawCopy.ratio.toFixed(2)}x of it`);
  }
  // Keys per team, issued once per run with the CLI: the biggest and the smallest now, others as a pass needs them (walk-8).
  const issued = new Map<string, Promise<string>>();
  const keyOf = (teamId: string) => {
    if (!issued.has(teamId)) issued.set(teamId, createKey(root, target, teamId));
    return issued.get(teamId)!;
  };
  const keys: Keys = { biggest: await keyOf(dataset.biggest.teamId), smallest: await keyOf(dataset.smallest.teamId) };

  const checks: Check[] = [...importChecks(importResult)];
  const haveWrk = onPath('wrk');
  const generator: LoadGenerator = o.loadGenerator === 'auto' ? (haveWrk ? 'wrk' : 'autocannon') : o.loadGenerator;
  if (generator === 'wrk' && !haveWrk) throw new UsageError('--load-generator wrk: wrk is not on the PATH (apt-get install wrk)');
  say(`load generator: ${generator}${generator === 'autocannon' && o.loadGenerator === 'auto' ? ' (wrk is not installed; apt-get install wrk for a lighter one)' : ''}`);
  const havePgbench = onPath('pgbench');
  const anchorTool: AnchorTool = o.anchor === 'auto' ? (havePgbench ? 'pgbench' : 'driver') : o.anchor;
  if (anchorTool === 'pgbench' && !havePgbench) throw new UsageError('--anchor pgbench: pgbench is not on the PATH (apt-get install postgresql-client)');
  const ctx: BenchContext = { root, workDir, logDir, o, generator, anchorTool, target, dataset, keys, markerFile, checks, say, keyOf };
  const passes: PassResult[] = [];
  for (const [i, workers] of o.workers.entries()) passes.push(await runPass(ctx, workers, i === 0));

  let startup: StartupResult | null = null;
  if (!o.skipStartup) {
    say('measuring the embedded default: first start on an empty DATA_DIR, then a restart');
    startup = await measureStartup(root, workDir, logDir);
    checks.push(...startupChecks(startup));
  }

  const report: BenchReport = {
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    command: ['npm run bench', ...(argv.length > 0 ? ['--', ...argv] : [])].join(' '),
    machine: { cpus: os.availableParallelism(), node: process.version, loadAvgAtStart },
    settings: {
      users: o.users, teams: o.teams, seed: o.seed, durationS: o.duration, rounds: o.rounds, connections: o.connections, loadGenerator: generator,
      database: 'databaseUrl' in target ? new URL(target.databaseUrl).pathname.slice(1) + ' (DATABASE_URL)' : 'embedded',
      serviceEnv: o.serviceEnv,
      anchor: anchorTool,
    },
    dataset: { users: dataset.users, teams: dataset.teams.length, biggest: dataset.biggest, smallest: dataset.smallest },
    import: importResult,
    startup,
    passes,
    checks,
  };
  process.stdout.write('\n' + renderReport(report) + '\n');
  const files = writeResults(report, stamp);
  say(`wrote ${files.join(', ')}`);
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  let options;
  try {
    options = parseOptions(argv);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`bench: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  if (options === 'help') return 0;
  process.chdir(root);
  process.on('exit', killAllNow);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      say(`${signal}: stopping everything the benchmark started`);
      void stopAll().finally(() => process.exit(130));
    });
  }
  try {
    await bench(options, argv);
    return 0;
  } catch (err) {
    say(`failed: ${(err as Error).stack ?? err}`);
    return 1;
  } finally {
    await stopAll();
  }
}

process.exitCode = await main();
