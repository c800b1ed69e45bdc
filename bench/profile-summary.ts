/**
 * Where the service's CPU time went, from a V8 profile written by
 * `npm run bench -- --profile`: self time per package or file, then per
 * function, as shares of the busy (non-idle) time.
 *
 *   npx tsx bench/profile-summary.ts bench/.work/logs/<run>/profile-workers-1/CPU.*.cpuprofile [top]
 */
import fs from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, topArg] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: tsx bench/profile-summary.ts FILE.cpuprofile [top]\n');
  process.exit(2);
}
const top = Number(topArg ?? 25);
const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));

const short = (url: string) => url.replace(/^file:\/\/.*?\/node_modules\//, '').replace(/^file:\/\/.*?\/(dist|src)\//, '$1/');
/** `fastify`, `@fastify/cors`, `dist/users/routes.js`, `node:net`, or a V8 bucket like `(garbage collector)`. */
const owner = (url: string, fn: string) => {
  if (url === '') return fn.startsWith('(') ? fn : '(native)';
  const s = short(url);
  const pkg = /^(@[^/]+\/[^/]+|[^/:]+)\//.exec(s);
  return s.startsWith('dist/') || s.startsWith('src/') || s.startsWith('node:') || !pkg ? s : pkg[1]!;
};

const byOwner = new Map<string, number>();
const byFunction = new Map<string, number>();
let busy = 0;
let idle = 0;
profile.samples.forEach((id, i) => {
  const node = nodes.get(id)!;
  const dt = profile.timeDeltas[i] ?? 0;
  const { functionName, url, lineNumber } = node.callFrame;
  if (functionName === '(idle)') {
    idle += dt;
    return;
  }
  busy += dt;
  const who = owner(url, functionName);
  byOwner.set(who, (byOwner.get(who) ?? 0) + dt);
  const fn = `${functionName || '(anonymous)'} ${url ? `${short(url)}:${lineNumber + 1}` : ''}`.trim();
  byFunction.set(fn, (byFunction.get(fn) ?? 0) + dt);
});

const pct = (v: number) => `${((100 * v) / Math.max(busy, 1)).toFixed(1).padStart(5)}%`;
const print = (title: string, m: Map<string, number>) => {
  process.stdout.write(`\n${title}\n`);
  for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`${pct(v)}  ${k}\n`);
};
process.stdout.write(`busy ${(busy / 1e6).toFixed(1)} s, idle ${(idle / 1e6).toFixed(1)} s (shares below are of busy time)\n`);
print('self time by package / file', byOwner);
print('self time by function', byFunction);
