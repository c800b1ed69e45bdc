import type { ImportResult } from './import.js';
import type { LoadResult } from './load-plan.js';
import type { Scenario } from './scenarios.js';
import type { StartupResult } from './startup.js';

export interface ScenarioResult {
  id: string;
  title: string;
  service: LoadResult;
  floor: LoadResult;
  /** Service requests/s over floor requests/s. */
  floorRatio: number;
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
  /** Peak summed VmRSS of the service's Node processes (primary and workers) while it was under load. */
  memoryPeakMb: number;
  /** Peak VmRSS of its largest single process. */
  memoryLargestProcessMb: number;
  logFile: string;
  scenarios: ScenarioResult[];
}

export interface Check {
  name: string;
  value: string;
  target: string;
  pass: boolean;
}

export interface BenchReport {
  startedAt: string;
  finishedAt: string;
  command: string;
  machine: { cpus: number; node: string; loadAvgAtStart: number[] };
  settings: { users: number; teams: number; seed: number; durationS: number; rounds: number; connections: number; loadGenerator: string; database: string; serviceEnv: Record<string, string> };
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

/**
 * Judges each scenario once every scenario of the pass has run. A relative
 * target compares the two scenarios' ratios to their floors: each ratio was
 * measured in rounds alternating with its floor, so it holds still while the
 * machine's speed drifts between the two scenarios' runs; the floors of the
 * compared scenarios send answers of the same kind and size.
 */
export function judge(measured: { scenario: Scenario; service: LoadResult; floor: LoadResult; peakRssMb: number }[]): ScenarioResult[] {
  const ratios = new Map(measured.map((m) => [m.scenario.id, m.floor.requestsPerSec > 0 ? m.service.requestsPerSec / m.floor.requestsPerSec : 0]));
  return measured.map(({ scenario, service, floor, peakRssMb }) => {
    const errors = errorsOf(service, scenario.expect);
    const floorRatio = floor.requestsPerSec > 0 ? service.requestsPerSec / floor.requestsPerSec : 0;
    const t = scenario.target;
    let target = 'no errors';
    // Three decimals where the target is judged: 0.7987 printed as 0.80 beside FAIL read as a bug.
    let value = `${floorRatio.toFixed(3)}x floor`;
    let met = true;
    if (t.kind === 'floor') {
      target = `>= ${t.min}x floor`;
      met = floorRatio >= t.min;
      if (t.p99MaxMs !== undefined) {
        target += `, p99 <= ${t.p99MaxMs} ms`;
        met &&= service.p99Ms <= t.p99MaxMs;
      }
    } else if (t.kind === 'relative') {
      const other = ratios.get(t.to);
      const rel = other ? floorRatio / other : 0;
      target = `>= ${t.min}x ${t.to}`;
      value = `${rel.toFixed(3)}x ${t.to}`;
      met = other !== undefined && rel >= t.min;
    }
    return { id: scenario.id, title: scenario.title, service, floor, floorRatio, errors, target, measured: value, pass: met && errors === 0, peakRssMb };
  });
}

function table(header: string[], rows: string[][], rightAligned: Set<number>): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (rightAligned.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ').trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

const num = (n: number) => Math.round(n).toLocaleString('en');
const ms = (n: number) => n.toFixed(n < 10 ? 2 : 1);
const verdict = (pass: boolean) => (pass ? 'pass' : 'FAIL');

export function renderReport(report: BenchReport): string {
  const out: string[] = [];
  out.push(`dataset: ${num(report.dataset.users)} users in ${report.dataset.teams} teams (biggest ${num(report.dataset.biggest.users)}, smallest ${num(report.dataset.smallest.users)}); ` +
    `${report.settings.connections} connections (${report.settings.loadGenerator}), ${report.settings.durationS} s per scenario in ${report.settings.rounds} rounds alternating with the floor; database: ${report.settings.database}` +
    (Object.keys(report.settings.serviceEnv).length > 0 ? `; service env: ${Object.entries(report.settings.serviceEnv).map(([k, v]) => `${k}=${v}`).join(' ')}` : ''));
  for (const pass of report.passes) {
    const rss = pass.workers > 1 ? `${pass.memoryPeakMb.toFixed(0)} MB in all, largest process ${pass.memoryLargestProcessMb.toFixed(0)} MB` : `${pass.memoryPeakMb.toFixed(0)} MB`;
    out.push('', `service with WORKERS=${pass.workers} (peak RSS under load ${rss}; log ${pass.logFile})`);
    out.push(table(
      ['#', 'scenario', 'req/s', 'p50 ms', 'p99 ms', 'floor req/s', 'ratio', 'errors', 'target', 'measured', 'result'],
      pass.scenarios.map((s, i) => [
        String(i + 1), s.title, num(s.service.requestsPerSec), ms(s.service.p50Ms), ms(s.service.p99Ms), num(s.floor.requestsPerSec),
        s.floorRatio.toFixed(2), String(s.errors), s.target, s.measured, verdict(s.pass),
      ]),
      new Set([2, 3, 4, 5, 6, 7]),
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
