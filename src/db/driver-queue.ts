import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/**
 * postgres.js 3.4.9's connection queues slow every query of a long-lived
 * process after a burst of load (docs/decisions/driver-queue.md);
 * tools/patch-driver.mjs, run by `npm ci`, fixes the installed driver and
 * marks both of its queue files. This refuses a driver without the mark, so
 * that an install that skipped the fix (`--ignore-scripts`) fails at start,
 * saying why, rather than slowing down days later. The mark and the files are
 * spelled again in the tool, which runs before any build and cannot import
 * this; test/driver-queue.test.ts checks that both spell them alike.
 */
export const DRIVER_QUEUE_MARK = '/* hds: queue fix (tools/patch-driver.mjs) */';
export const DRIVER_QUEUE_FILES = ['src/queue.js', 'cjs/src/queue.js'];

/** The folder of the `postgres` package imported here. */
export function driverRoot(): string {
  let dir = path.dirname(createRequire(import.meta.url).resolve('postgres'));
  while (!isDriverPackage(dir)) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error('the postgres package has no folder of its own above its entry');
    dir = up;
  }
  return dir;
}

function isDriverPackage(dir: string): boolean {
  const file = path.join(dir, 'package.json');
  return fs.existsSync(file) && (JSON.parse(fs.readFileSync(file, 'utf8')) as { name?: unknown }).name === 'postgres';
}

const checked = new Set<string>();
let installed: string | undefined;

/** Throws, naming the fix, unless the driver in `root` (the one imported here) has it; reads its files once per process. */
export function checkDriverQueue(root: string = (installed ??= driverRoot())): void {
  if (checked.has(root)) return;
  const unfixed = DRIVER_QUEUE_FILES.filter((name) => !fs.readFileSync(path.join(root, name), 'utf8').includes(DRIVER_QUEUE_MARK));
  if (unfixed.length > 0) {
    throw new Error(`the postgres driver in ${root} lacks this project's fix of its connection queues (${unfixed.join(', ')}): `
      + 'run `node tools/patch-driver.mjs` (npm ci runs it, unless install scripts are off); see docs/decisions/driver-queue.md');
  }
  checked.add(root);
}
