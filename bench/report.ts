import type { ImportResult } from './import.js';
import type { LoadResult } from './load-plan.js';
import type { Condition, Scenario } from './scenarios.js';
import type { StartupResult } from './startup.js';

export interface ScenarioResult {
  id: string;
  title: string;
  /** The service's settings beyond the pass's, when it ran with some (the page cache off). */
  serviceEnv?: Record<string, string>;
  /** Concurrent connections, when not the run's. */
  connections?: number;
  service: LoadResult;
  floor: LoadResult;
  /** Service requests/s over floor requests/s. */
  floorRatio: number;
  /** For list scenarios: the same page statement straight on PostgreSQL (bench/anchor.ts); for writes, the service's own write functions without HTTP (bench/write-anchor.ts); in the same rounds. */
  anchor?: LoadResult;
  /** Service requests/s over the anchor's statements/s. */
  anchorRatio?: number;
  /** Answers with another status than expected, plus connection errors and timeouts. */
  errors: number;
  target: string;
  /** What the target compares, e.g. 0.62 (ratio) or 0.91 (vs list-first). */
  measured: string;
  /** Target met and no errors (scenarios without a target only need the latter). */
  pass: boolean;
  /** Peak summed resident set of the service's processes during this scenario's rounds (the pass's peak is the largest). */
  peakRssMb: number;
}

export interface PassResult {
  workers: number;
  /** Peak summed VmRSS of the service's Node processes (primary and workers) while it was under load, over every service of the pass. */
  memoryPeakMb: number;
  /** Peak VmRSS of its largest single process. */
  memoryLargestProcessMb: number;
  logFile: string;
  /** Each service the pass started (the one as configured, then the one with the page cache off): its settings, log and peaks. */
  services: { serviceEnv: Record<string, string>; logFile: string; memoryPeakMb: number; memoryLargestProcessMb: number }[];
  scenarios: ScenarioResult[];
}

export interface Check {
  name: string;
  value: string;
  target: string;
  pass: boolean;
  /** The figures behind the value, for the JSON. */
  details?: Record<string, unknown>;
}

export interface BenchReport {
  startedAt: string;
  finishedAt: string;
  command: string;
  machine: { cpus: number; node: string; loadAvgAtStart: number[] };
  settings: {
    users: number; teams: number; seed: number; durationS: number; rounds: number; connections: number; loadGenerator: string; database: string; serviceEnv: Record<string, string>;
    /** What ran the PostgreSQL anchor: pgbench, or the postgres driver when pgbench is missing. */
    anchor?: string;
  };
  dataset: { users: number; teams: number; biggest: { teamId: string; users: number }; smallest: { teamId: string; users: number } };
  import: ImportResult | null;
  startup: StartupResult | null;
  passes: PassResult[];
  checks: Check[];
}

export function errorsOf(result: LoadResult, expect: number): number {
  const wrong = Object.entries(result.statuses).reduce((sum, [code, n]) => sum + (Number(code) === expect ? 0 : n), 0);
  return wrong + result.socketErrors;
}

export interface Measured {
  scenario: Scenario;
  service: LoadResult;
  floor: LoadResult;
  anchor?: LoadResult;
  peakRssMb: number;
  serviceEnv?: Record<string, string>;
}

const ratioOf = (a: LoadResult, b: LoadResult | undefined) => (b && b.requestsPerSec > 0 ? a.requestsPerSec / b.requestsPerSec : 0);

/** One condition judged: what it asks, what was measured (three decimals where a ratio is judged: 0.7987 printed as 0.80 beside FAIL read as a bug). */
function judgeCondition(c: Condition, m: Measured, floorRatios: Map<string, number>): { target: string; measured: string; met: boolean } {
  const floorRatio = ratioOf(m.service, m.floor);
  switch (c.kind) {
    case 'floor':
      return { target: `>= ${c.min}x floor`, measured: `${floorRatio.toFixed(3)}x floor`, met: floorRatio >= c.min };
    case 'anchor': {
      const ratio = ratioOf(m.service, m.anchor);
      return { target: `>= ${c.min}x PostgreSQL`, measured: `${ratio.toFixed(3)}x PostgreSQL`, met: m.anchor !== undefined && ratio >= c.min };
    }
    case 'anchor-p99': {
      const ratio = m.anchor && m.anchor.p99Ms > 0 ? m.service.p99Ms / m.anchor.p99Ms : Infinity;
      return { target: `p99 <= ${c.max}x PostgreSQL's`, measured: `p99 ${ratio.toFixed(2)}x PostgreSQL's (${m.anchor?.p99Ms ?? '-'} ms)`, met: ratio <= c.max };
    }
    case 'p99':
      return { target: `p99 <= ${c.maxMs} ms`, measured: `p99 ${m.service.p99Ms} ms`, met: m.service.p99Ms <= c.maxMs };
    case 'rate':
      return { target: `>= ${c.min.toLocaleString('en')} answers/s`, measured: `${Math.round(m.service.requestsPerSec).toLocaleString('en')}/s`, met: m.service.requestsPerSec >= c.min };
    case 'relative': {
      const other = floorRatios.get(c.to);
      const rel = other ? floorRatio / other : 0;
      return { target: `>= ${c.min}x ${c.to}`, measured: other === undefined ? `no ${c.to} to compare` : `${rel.toFixed(3)}x ${c.to}`, met: other !== undefined && rel >= c.min };
    }
    case 'steady': {
      const other = floorRatios.get(c.to);
      const rel = other ? floorRatio / other : 0;
      const shown = c.shown === undefined ? undefined : floorRatios.get(c.shown);
      return {
        target: `within ${Math.round(c.within * 100)}% of ${c.to}`,
        measured: (other === undefined ? `no ${c.to} to compare` : `${rel.toFixed(3)}x ${c.to}`) +
          (shown ? ` (${(floorRatio / shown).toFixed(3)}x ${c.shown})` : ''),
        met: other !== undefined && Math.abs(rel - 1) <= c.within,
      };
    }
  }
}

/**
 * Judges each scenario once every scenario of the pass has run. A relative
 * target compares the two scenarios' ratios to their floors: each ratio was
 * measured in rounds alternating with its floor, so it holds still while the
 * machine's speed drifts between the two scenarios' runs; the floors of the
 * compared scenarios send answers of the same kind and size.
 */
export function judge(measured: Measured[]): ScenarioResult[] {
  const floorRatios = new Map(measured.map((m) => [m.scenario.id, ratioOf(m.service, m.floor)]));
  return measured.map((m) => {
    const { scenario, service, floor, anchor, peakRssMb, serviceEnv } = m;
    const errors = errorsOf(service, scenario.expect);
    const floorRatio = ratioOf(service, floor);
    const judged = scenario.targets.map((c) => judgeCondition(c, m, floorRatios));
    const target = judged.length > 0 ? judged.map((j) => j.target).join(', ') : 'no errors';
    const value = judged.length > 0 ? judged.map((j) => j.measured).join(', ') : `${floorRatio.toFixed(3)}x floor`;
    return {
      id: scenario.id, title: scenario.connections ? `${scenario.title}, ${scenario.connections} connections` : scenario.title,
      ...(serviceEnv && { serviceEnv }), ...(scenario.connections && { connections: scenario.connections }), service, floor, floorRatio,
      ...(anchor && { anchor, anchorRatio: ratioOf(service, anchor) }),
      errors, target, measured: value, pass: judged.every((j) => j.met) && errors === 0, peakRssMb,
    };
  });
}

function table(header: string[], rows: string[][], rightAligned: Set<number>): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (rightAligned.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ').trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

export const num = (n: number) => Math.round(n).toLocaleString('en');
const ms = (n: number) => n.toFixed(n < 10 ? 2 : 1);
const verdict = (pass: boolean) => (pass ? 'pass' : 'FAIL');

function serviceLine(workers: number, svc: PassResult['services'][number]): string {
  const env = Object.entries(svc.serviceEnv).map(([k, v]) => `${k}=${v}`).join(' ');
  const rss = workers > 1 ? `${svc.memoryPeakMb.toFixed(0)} MB in all, largest process ${svc.memoryLargestProcessMb.toFixed(0)} MB` : `${svc.memoryPeakMb.toFixed(0)} MB`;
  return `${env === '' ? 'as configured' : env}, peak RSS under load ${rss} (log ${svc.logFile})`;
}

export function renderReport(report: BenchReport): string {
  const out: string[] = [];
  out.push(`dataset: ${num(report.dataset.users)} users in ${report.dataset.teams} teams (biggest ${num(report.dataset.biggest.users)}, smallest ${num(report.dataset.smallest.users)}); ` +
    `${report.settings.connections} connections unless a scenario names its own (${report.settings.loadGenerator}), ${report.settings.durationS} s per scenario in ${report.settings.rounds} rounds alternating with the floor; database: ${report.settings.database}` +
    (Object.keys(report.settings.serviceEnv).length > 0 ? `; service env: ${Object.entries(report.settings.serviceEnv).map(([k, v]) => `${k}=${v}`).join(' ')}` : '') +
    (report.settings.anchor ? `; PostgreSQL anchor (pg req/s): ${report.settings.anchor} for the lists, its own lookups on the driver for get-one, the service's own write functions without HTTP for the writes` : ''));
  for (const pass of report.passes) {
    out.push('', `service with WORKERS=${pass.workers}: ${pass.services.map((svc) => serviceLine(pass.workers, svc)).join('; ')}`);
    out.push(table(
      ['#', 'id', 'scenario', 'req/s', 'p50 ms', 'p99 ms', 'floor req/s', 'ratio', 'pg req/s', 'x pg', 'errors', 'target', 'measured', 'result'],
      pass.scenarios.map((s, i) => [
        String(i + 1), s.id, s.title, num(s.service.requestsPerSec), ms(s.service.p50Ms), ms(s.service.p99Ms), num(s.floor.requestsPerSec),
        s.floorRatio.toFixed(2), s.anchor ? num(s.anchor.requestsPerSec) : '-', s.anchorRatio?.toFixed(2) ?? '-', String(s.errors), s.target, s.measured, verdict(s.pass),
      ]),
      new Set([3, 4, 5, 6, 7, 8, 9, 10]),
    ));
  }
  out.push('', table(['check', 'measured', 'target', 'result'], report.checks.map((c) => [c.name, c.value, c.target, verdict(c.pass)]), new Set()));
  const all = [...report.passes.flatMap((p) => p.scenarios), ...report.checks];
  const met = all.filter((x) => x.pass).length;
  out.push('', `${met} of ${all.length} targets met${met === all.length ? '' : `; missed: ${[
    ...report.passes.flatMap((p) => p.scenarios.filter((s) => !s.pass).map((s) => `${s.id} (WORKERS=${p.workers})`)),
    ...report.checks.filter((c) => !c.pass).map((c) => c.name),
  ].join(', ')}`}`);
  return out.join('\n');
}
