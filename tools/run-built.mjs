#!/usr/bin/env node
// Runs a module of the build, building it first only when it is missing or older than its sources:
//
//   node [node flags] tools/run-built.mjs dist/server.js [args...]     (npm start, npm run hds)
//
// The build is out of date when anything under src/ (a file, or a folder: adding, removing or
// renaming a file changes its folder's time), tsconfig.json or tsconfig.build.json is newer than
// the entry module, which every build writes anew. The build is `tsc -p tsconfig.build.json`,
// here with --noEmitOnError so that a failed build leaves the old one out of date and is tried
// again. The compiler's output goes to stderr, like our own messages: stdout is the program's.
// Without the compiler (a production install) a build that is needed is an error; a current one
// just runs. Plain JavaScript: it runs without the dev dependencies.
//
// The entry runs in this process (no second Node, so no signals, standard streams or exit codes
// to relay), with process.argv as if it had been started itself: `node <flags> dist/server.js
// args...`, which is also what node:cluster starts workers with. Node flags go on the command
// that starts this launcher, and npm's scripts `exec` it, so that the signals npm passes on reach
// it rather than the shell between them.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const say = (msg) => process.stderr.write(`run-built: ${msg}\n`);

const [entryArg, ...args] = process.argv.slice(2);
if (!entryArg) {
  say('usage: node [node flags] tools/run-built.mjs dist/ENTRY.js [args...]');
  process.exit(2);
}
const entry = path.resolve(root, entryArg);

/** The newest of `file` and everything under it. */
function newest(file, best) {
  let stat;
  try {
    stat = fs.statSync(file);
  } catch {
    return best; // no src/ (the published package holds only dist/): nothing to be older than
  }
  if (stat.mtimeMs > best.mtimeMs) best = { mtimeMs: stat.mtimeMs, name: path.relative(root, file) + (stat.isDirectory() ? '/' : '') };
  if (stat.isDirectory()) for (const name of fs.readdirSync(file)) best = newest(path.join(file, name), best);
  return best;
}

/** Why a build is needed, or undefined when the build is current. */
function buildNeeded() {
  let built;
  try {
    built = fs.statSync(entry).mtimeMs;
  } catch {
    return `${entryArg} is missing`;
  }
  const source = ['src', 'tsconfig.json', 'tsconfig.build.json']
    .reduce((best, name) => newest(path.join(root, name), best), { mtimeMs: 0, name: '' });
  return source.mtimeMs > built ? `${source.name} is newer than ${entryArg}` : undefined;
}

const reason = buildNeeded();
if (reason) {
  let tsc;
  try {
    tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  } catch {
    say(`${reason}, and the TypeScript compiler is not installed to build it (a production install).`);
    say('Build before leaving out the dev dependencies: npm ci && npm run build && npm prune --omit=dev');
    process.exit(1);
  }
  say(`${reason}: building (tsc -p tsconfig.build.json)`);
  const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--noEmitOnError'], { cwd: root, stdio: ['ignore', 2, 2] });
  if (result.status !== 0) {
    say(`the build failed (${result.error?.message ?? result.signal ?? `exit ${result.status}`}); nothing was run`);
    process.exit(1);
  }
}

// npm passes SIGINT and SIGTERM on to its script, and a terminal's Ctrl-C reaches every process of
// its group: under npm, one Ctrl-C arrives twice, and the server takes a second signal as "stop now"
// (its embedded PostgreSQL would be left running). A signal repeated within a second is taken as
// the same one; any other that the entry does not handle ends the process, as without this listener.
for (const signal of ['SIGINT', 'SIGTERM']) {
  let last = -Infinity;
  const onSignal = () => {
    const repeated = Date.now() - last < 1000;
    last = Date.now();
    if (repeated || process.listenerCount(signal) > 1) return;
    process.removeListener(signal, onSignal);
    process.kill(process.pid, signal);
  };
  process.on(signal, onSignal);
}

process.argv.splice(1, Infinity, entry, ...args);
await import(pathToFileURL(entry).href);
