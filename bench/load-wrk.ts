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
import type { LoadResult, LoadSpec, PathPlan, PlannedRequest } from './load-plan.js';
import { runToEnd } from './processes.js';

/** A Lua string literal (JSON's escapes are a subset of Lua's for these characters). */
const lua = (s: string) => JSON.stringify(s);

const luaTable = (items: string[]) => `{${items.join(',')}}`;

const luaHeaders = (headers: Record<string, string>) => luaTable(Object.entries(headers).map(([k, v]) => `[${lua(k)}]=${lua(v)}`));

/** A Lua table of one request: method, path, headers and body (nil for none). */
const luaRequest = (r: PlannedRequest) => `{${lua(r.method ?? 'GET')},${lua(r.path)},${luaHeaders(r.headers)}${r.body !== undefined ? `,${lua(r.body)}` : ''}}`;

/**
 * delete-undo (bench/load-plan.ts). wrk's request() does not know which
 * connection asks, and response() does not know which request it answers:
 * each request carries `x-request-id: del-<id>` or `undo-<id>`, which comes
 * back in the answer's headers. A delete answered 200 queues its undo, which
 * the next request() sends (from whichever connection asks first); an id
 * stays busy from its delete until its undo answered (or until a delete that
 * failed answered), and a busy id is never picked.
 */
function deleteUndoFunctions(plan: Extract<PathPlan, { kind: 'delete-undo' }>): string {
  return [
    ...linesOf(plan.file),
    `local base = ${luaHeaders(plan.headers)}`,
    'local busy, undos = {}, {}',
    'local function tagged(id)',
    '  local headers = {}',
    '  for k, v in pairs(base) do headers[k] = v end',
    '  headers["x-request-id"] = id',
    '  return headers',
    'end',
    'request = function()',
    '  local id = table.remove(undos)',
    '  if id then return wrk.format("POST", "/v2/user/undo_delete?user_id=" .. id, tagged("undo-" .. id)) end',
    '  repeat id = lines[math.random(#lines)] until not busy[id]',
    '  busy[id] = true',
    '  return wrk.format("DELETE", "/v2/user/" .. id, tagged("del-" .. id))',
    'end',
    'answered = function(status, headers)',
    '  local rid = headers["x-request-id"] or headers["X-Request-Id"] or ""',
    '  local kind, id = rid:match("^(%a+)-(.+)$")',
    '  if kind == "del" and status == 200 then undos[#undos + 1] = id',
    '  elseif kind then busy[id] = nil end',
    'end',
  ].join('\n');
}

/** Reads an id file into the Lua table `lines`. */
function linesOf(file: string): string[] {
  return [
    'local lines = {}',
    `for line in io.lines(${lua(file)}) do if line ~= "" then lines[#lines + 1] = line end end`,
    `if #lines == 0 then error(${lua(`no lines in ${file}`)}) end`,
  ];
}

/** The Lua `request` function of a plan (and `answered`, when the plan reads answers): every request its own path and headers. */
function requestFunction(plan: PathPlan): string {
  switch (plan.kind) {
    case 'fixed':
      return [
        `local requests = ${luaTable(plan.requests.map(luaRequest))}`,
        'local turn = 0',
        'request = function()',
        '  turn = turn % #requests + 1',
        '  local r = requests[turn]',
        '  return wrk.format(r[1], r[2], r[3], r[4])',
        'end',
      ].join('\n');
    case 'random-line':
      return [
        ...linesOf(plan.file),
        `local headers = ${luaHeaders(plan.headers)}`,
        `local bodies = ${luaTable((plan.bodies ?? []).map(lua))}`,
        'local turn = 0',
        'request = function()',
        '  local body = nil',
        '  if #bodies > 0 then turn = turn % #bodies + 1; body = bodies[turn] end',
        `  return wrk.format(${lua(plan.method ?? 'GET')}, ${lua(plan.prefix)} .. lines[math.random(#lines)], headers, body)`,
        'end',
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
    case 'create':
      // The run's tag is the script's argument (wrk ... -- TAG), so that the warm-up and the measured run differ.
      return [
        `local headers = ${luaHeaders(plan.headers)}`,
        'local tag, n = "", 0',
        'init = function(args) tag = args[1] end',
        'request = function()',
        '  n = n + 1',
        `  return wrk.format("POST", ${lua(plan.path)}, headers, '{"client_user_id":"' .. ${lua(plan.clientUserIdPrefix)} .. tag .. "-" .. n .. '"}')`,
        'end',
      ].join('\n');
    case 'delete-undo':
      return deleteUndoFunctions(plan);
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
response = function(status, headers)
  statuses[status] = (statuses[status] or 0) + 1
  if answered then answered(status, headers) end
end
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

async function wrk(spec: LoadSpec, scriptFile: string, seconds: number, tag: string): Promise<WrkResult> {
  // wrk takes whole seconds only. The tag is the script's argument (the create plan's client_user_ids).
  const args = ['-t1', `-c${spec.connections}`, `-d${Math.max(1, Math.round(seconds))}s`, '--timeout', '10s', '-s', scriptFile, spec.url, '--', tag];
  const { stdout } = await runToEnd('wrk', 'wrk', args);
  const line = stdout.split('\n').find((l) => l.startsWith('WRK-RESULT '));
  if (!line) throw new Error(`wrk printed no result:\n${stdout}`);
  return JSON.parse(line.slice('WRK-RESULT '.length)) as WrkResult;
}

export async function runWrk(workDir: string, spec: LoadSpec, run: number): Promise<LoadResult> {
  const scriptFile = path.join(workDir, `load-${process.pid}-${run}.lua`);
  fs.writeFileSync(scriptFile, script(spec.plan));
  try {
    if (spec.warmup > 0) await wrk(spec, scriptFile, spec.warmup, `${spec.tag}w`);
    const r = await wrk(spec, scriptFile, spec.duration, spec.tag);
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
