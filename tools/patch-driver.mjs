#!/usr/bin/env node
// Fixes the connection queues of the installed postgres.js 3.4.9 (package.json's `postinstall`):
//
//   node tools/patch-driver.mjs [package folder]     (default: the `postgres` this project resolves)
//
// Why, and what it changes: docs/decisions/driver-queue.md. remove() searches from the queue's head
// and shift() drops the empty slots at the head once they are many, in src/queue.js (ESM) and
// cjs/src/queue.js (CommonJS). It refuses, writing nothing, any version but 3.4.9 and any text but
// the published or the fixed one; each file is renamed into place whole, so a process loading the
// driver meanwhile reads one text or the other. src/db/driver-queue.ts refuses to start without the
// fix. Plain JavaScript: it runs at install, before any build.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

export const DRIVER_VERSION = '3.4.9';
export const QUEUE_FILES = ['src/queue.js', 'cjs/src/queue.js'];
export const MARK = '/* hds: queue fix (tools/patch-driver.mjs) */';

// The published text of the two methods, and what replaces it (FIXES below: [published, fixed]).
// Both files hold the same text but for their module lines, which stay as they are.
const REMOVE_BEFORE = `    remove: (x) => {
      const index = xs.indexOf(x)
      return index === -1
        ? null
        : (xs.splice(index, 1), x)
    },`;
const REMOVE_AFTER = `    remove: (x) => {
      ${MARK}
      const at = xs.indexOf(x, index)
      return at === -1
        ? null
        : (xs.splice(at, 1), x)
    },`;
const SHIFT_BEFORE = `      if (index === xs.length) {
        index = 0
        xs = []
      } else {
        xs[index - 1] = undefined
      }`;
const SHIFT_AFTER = `      if (index === xs.length) {
        index = 0
        xs = []
      } else if (index >= 1024 && index * 2 >= xs.length) {
        xs = xs.slice(index)
        index = 0
      } else {
        xs[index - 1] = undefined
      }`;

export const FIXES = [[REMOVE_BEFORE, REMOVE_AFTER], [SHIFT_BEFORE, SHIFT_AFTER]];

/** The folder of the `postgres` package that this project's code imports. */
export function driverRoot() {
  const project = fileURLToPath(new URL('..', import.meta.url));
  let dir = path.dirname(createRequire(path.join(project, 'package.json')).resolve('postgres'));
  while (!isDriverPackage(dir)) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error('no package.json of postgres above its entry');
    dir = up;
  }
  return dir;
}

function isDriverPackage(dir) {
  const file = path.join(dir, 'package.json');
  return fs.existsSync(file) && readJson(file).name === 'postgres';
}

function readJson(file) {
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

/**
 * Fixes the queues under `root`. Returns 'patched' or 'already patched'; throws, having written
 * nothing, when the version or a file is not the one this fix was written for.
 */
export function patchDriver(root) {
  const { version } = readJson(path.join(root, 'package.json'));
  if (version !== DRIVER_VERSION) {
    throw new Error(`postgres ${version} in ${root}: this fix is for ${DRIVER_VERSION} only; check whether ${version} still needs it and update tools/patch-driver.mjs and src/db/driver-queue.ts`);
  }
  // Every file is checked before any is written.
  const changed = QUEUE_FILES.flatMap((name) => {
    const file = path.join(root, name);
    const text = fs.readFileSync(file, 'utf8');
    if (text.includes(MARK)) return [];
    if (FIXES.some(([published]) => text.split(published).length !== 2)) {
      throw new Error(`${file} is not the queue.js of postgres ${DRIVER_VERSION} that this fix was written for; nothing was changed`);
    }
    return [{ file, text: FIXES.reduce((fixed, [published, fix]) => fixed.replace(published, fix), text) }];
  });
  for (const { file, text } of changed) {
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, text);
    fs.renameSync(tmp, file);
  }
  return changed.length > 0 ? 'patched' : 'already patched';
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const root = process.argv[2] ? path.resolve(process.argv[2]) : driverRoot();
    process.stderr.write(`patch-driver: ${patchDriver(root)}: postgres ${DRIVER_VERSION} queues in ${root}\n`);
  } catch (err) {
    process.stderr.write(`patch-driver: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
