/**
 * One load run with wrk (when it is installed: `apt-get install wrk`), the
 * lighter of the two load generators: a C event loop that leaves more of this
 * 2-core machine to the server it measures than autocannon's Node process.
 * The same plans as bench/load-child.ts, written as a Lua script; the script's
 * done() prints one JSON line that becomes a LoadResult.
 *
 * wrk's latency histogram carries its coordinated-omission correction: after
 * the run it adds, for every answer slower than twice the mean interval
 * between one connection's requests, the answers that connection would have
 * sent meanwhile. Percentiles from wrk are therefore never lower than the raw
 * ones autocannon gives for the same answers.
 */
import fs from 'node:fs';
import path from 'node:path';
import { latencyBucket, mergeBuckets, percentile } from './latency.js';
import type { LoadResult, LoadSpec, PathPlan } from './load-plan.js';
import { runToEnd } from './processes.js';

/** A Lua string literal (JSON's escapes are a subset of Lua's for these characters). */
const lua = (s: string) => JSON.stringify(s);

const luaTable = (items: string[]) => `{${items.join(',')}}`;

const luaHeaders = (headers: Record<string, string>) => luaTable(Object.entries(headers).map(([k, v]) => `[${lua(k)}]=${lua(v)}`));

/** The Lua `request` function of a plan: every request its own path and headers. */
function requestFunction(plan: PathPlan): string {
  switch (plan.kind) {
    case 'fixed':
      return [
        `local requests = ${luaTable(plan.requests.map((r) => `{${lua(r.path)},${luaHeaders(r.headers)}}`))}`,
        'local turn = 0',
        'request = function()',
        '  turn = turn % #requests + 1',
        '  return wrk.format("GET", requests[turn][1], requests[turn][2])',
        'end',
      ].join('\n');
    case 'random-line':
      return [
        'local lines = {}',
        `for line in io.lines(${lua(plan.file)}) do if line ~= "" then lines[#lines + 1] = line end end`,
        `if #lines == 0 then error(${lua(`no lines in ${plan.file}`)}) end`,
        `local headers = ${luaHeaders(plan.headers)}`,
        `request = function() return wrk.format("GET", ${lua(plan.prefix)} .. lines[math.random(#lines)], headers) end`,
      ].join('\n');
    case 'random-path':
      return [
        `local paths = ${luaTable(plan.paths.map(lua))}`,
        `local headers = ${luaHeaders(plan.headers)}`,
        'request = function() return wrk.format("GET", paths[math.random(#paths)], headers) end',
      ].join('\n');
    case 'random-offset':
      return [
        `local headers = ${luaHeaders(plan.headers)}`,
        `request = function() return wrk.format("GET", ${lua(plan.prefix)} .. math.random(0, ${plan.maxOffset}), headers) end`,
      ].join('\n');
  }
}

/**
 * The whole script. Statuses are counted in the thread's Lua state (one
 * thread) and read back in done(), which runs in the main state.
 */
function script(plan: PathPlan): string {
  return `${requestFunction(plan)}
math.randomseed(os.time())
statuses = {}
response = function(status) statuses[status] = (statuses[status] or 0) + 1 end
local thread
setup = function(t) thread = t end
done = function(summary, latency)
  local parts = {}
  for i = 1, #latency do
    local us, count = latency(i)
    parts[#parts + 1] = "[" .. us .. "," .. count .. "]"
  end
  local codes = {}
  for status, count in pairs(thread:get("statuses")) do codes[#codes + 1] = '"' .. status .. '":' .. count end
  local e = summary.errors
  io.write(string.format('\\nWRK-RESULT {"requests":%d,"durationUs":%d,"socketErrors":%d,"maxUs":%d,"latencyUs":[%s],"statuses":{%s}}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, latency.max, table.concat(parts, ","), table.concat(codes, ",")))
end
`;
}

interface WrkResult {
  requests: number;
  durationUs: number;
  socketErrors: number;
  maxUs: number;
  latencyUs: [number, number][];
  statuses: Record<string, number>;
}

async function wrk(spec: LoadSpec, scriptFile: string, seconds: number): Promise<WrkResult> {
  // wrk takes whole seconds only.
  const args = ['-t1', `-c${spec.connections}`, `-d${Math.max(1, Math.round(seconds))}s`, '--timeout', '10s', '-s', scriptFile, spec.url];
  const { stdout } = await runToEnd('wrk', 'wrk', args);
  const line = stdout.split('\n').find((l) => l.startsWith('WRK-RESULT '));
  if (!line) throw new Error(`wrk printed no result:\n${stdout}`);
  return JSON.parse(line.slice('WRK-RESULT '.length)) as WrkResult;
}

/** Is wrk on the PATH? (`wrk --version` exits with 1, so look for the file.) */
export function wrkInstalled(): boolean {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => {
    try {
      fs.accessSync(path.join(dir, 'wrk'), fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

export async function runWrk(workDir: string, spec: LoadSpec, run: number): Promise<LoadResult> {
  const scriptFile = path.join(workDir, `load-${process.pid}-${run}.lua`);
  fs.writeFileSync(scriptFile, script(spec.plan));
  try {
    if (spec.warmup > 0) await wrk(spec, scriptFile, spec.warmup);
    const r = await wrk(spec, scriptFile, spec.duration);
    // wrk's own buckets (µs) regrouped into ours: several of its fall into one.
    const latency = mergeBuckets([r.latencyUs.map(([us, count]) => [latencyBucket(us / 1000), count])]);
    return {
      requestsPerSec: r.requests / (r.durationUs / 1e6),
      requests: r.requests,
      p50Ms: percentile(latency, 0.5),
      p99Ms: percentile(latency, 0.99),
      maxMs: r.maxUs / 1000,
      latency,
      statuses: r.statuses,
      socketErrors: r.socketErrors,
      durationS: r.durationUs / 1e6,
    };
  } finally {
    fs.rmSync(scriptFile, { force: true });
  }
}
