/**
 * The fix of postgres.js 3.4.9's connection queues (tools/patch-driver.mjs,
 * docs/decisions/driver-queue.md): the installed driver has it and behaves as
 * a list; the pool's busy pattern no longer grows what every query scans;
 * the tool and the service's check refuse what they should. The tool only
 * ever writes to copies of the package here: other test files load the
 * installed driver meanwhile.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import fc from 'fast-check';
import { checkDriverQueue, DRIVER_QUEUE_FILES, DRIVER_QUEUE_MARK, driverRoot } from '../src/db/driver-queue.js';
import { VERIFIED_DRIVER_VERSION } from '../src/db/transaction-gate.js';
import { ROOT } from './helpers.js';

interface Queue<T> {
  readonly length: number;
  push(x: T): T;
  shift(): T | undefined;
  remove(x: T): T | null;
}
interface PatchTool {
  DRIVER_VERSION: string;
  QUEUE_FILES: string[];
  MARK: string;
  FIXES: [string, string][];
  driverRoot(): string;
  patchDriver(root: string): 'patched' | 'already patched';
}

const TOOL = path.join(ROOT, 'tools', 'patch-driver.mjs');
const tool = (await import(pathToFileURL(TOOL).href)) as PatchTool;

/** The queue module of the driver in `root`, as the ESM build loads it. */
async function loadQueue(root: string): Promise<<T>() => Queue<T>> {
  return ((await import(pathToFileURL(path.join(root, 'src', 'queue.js')).href)) as { default: <T>() => Queue<T> }).default;
}

/** Each file of the driver's queues, as `root` holds it. */
function queueTexts(root: string): string[] {
  return tool.QUEUE_FILES.map((name) => fs.readFileSync(path.join(root, name), 'utf8'));
}

/**
 * A copy of what the tool and the check read of the installed driver (its
 * package.json and queue files), the queues as published (the fix taken back out).
 */
function publishedCopy(dir: string): string {
  const root = path.join(dir, 'postgres');
  for (const name of ['package.json', ...tool.QUEUE_FILES]) {
    const text = fs.readFileSync(path.join(driverRoot(), name), 'utf8');
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), tool.FIXES.reduce((t, [published, fixed]) => t.replace(fixed, published), text));
  }
  return root;
}

/**
 * Over `rounds` of what the pool does with a query while all of its
 * `connections` are busy (`go(busy.shift(), query)`, then `move(c, busy)`:
 * remove, push): the most slots one `indexOf` of the queue looked at, and
 * the most slots the queue's array held.
 */
function busyPattern(makeQueue: <T>() => Queue<T>, connections: number, rounds: number): { scanned: number; held: number } {
  const busy = makeQueue<object>();
  for (let i = 0; i < connections; i++) busy.push({ connection: i });
  let scanned = 0;
  let held = 0;
  const indexOf = Array.prototype.indexOf;
  Array.prototype.indexOf = function (this: unknown[], x: unknown, from?: number) {
    scanned = Math.max(scanned, this.length - (from ?? 0));
    held = Math.max(held, this.length);
    return indexOf.call(this, x, from);
  };
  try {
    for (let i = 0; i < rounds; i++) {
      const c = busy.shift()!;
      busy.remove(c);
      busy.push(c);
    }
  } finally {
    Array.prototype.indexOf = indexOf;
  }
  assert.equal(busy.length, connections);
  return { scanned, held };
}

describe('postgres.js connection queues (tools/patch-driver.mjs)', () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hds-driver-queue-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('the installed driver has the fix, and the tool and the service spell it alike', () => {
    assert.equal(tool.MARK, DRIVER_QUEUE_MARK);
    assert.deepEqual(tool.QUEUE_FILES, DRIVER_QUEUE_FILES);
    assert.equal(tool.DRIVER_VERSION, VERIFIED_DRIVER_VERSION);
    assert.equal(tool.driverRoot(), driverRoot());
    for (const text of queueTexts(driverRoot())) assert.ok(text.includes(DRIVER_QUEUE_MARK));
    assert.doesNotThrow(() => checkDriverQueue());
  });

  it('the fixed queue keeps the order of a plain list through pushes, shifts and removals', async () => {
    const makeQueue = await loadQueue(driverRoot());
    // Long runs of pushes and shifts, so that the head passes 1,024 and the empty slots are dropped.
    const op = fc.oneof(
      { arbitrary: fc.constant({ kind: 'push' as const }), weight: 5 },
      { arbitrary: fc.constant({ kind: 'shift' as const }), weight: 4 },
      { arbitrary: fc.nat().map((n) => ({ kind: 'remove' as const, n })), weight: 1 },
    );
    fc.assert(fc.property(fc.array(op, { minLength: 2000, maxLength: 6000 }), (ops) => {
      const queue = makeQueue<{ id: number }>();
      const model: { id: number }[] = [];
      let next = 0;
      for (const o of ops) {
        if (o.kind === 'push') {
          const x = { id: next++ };
          queue.push(x);
          model.push(x);
        } else if (o.kind === 'shift') {
          if (model.length === 0) continue; // the pool never shifts an empty queue
          assert.equal(queue.shift(), model.shift());
        } else {
          // Half the time an element that is there, otherwise one that is not (as move() does after shift()).
          const x = o.n % 2 === 0 && model.length > 0 ? model[(o.n >> 1) % model.length]! : { id: -1 };
          const at = model.indexOf(x);
          if (at !== -1) model.splice(at, 1);
          assert.equal(queue.remove(x), at === -1 ? null : x);
        }
        assert.equal(queue.length, model.length);
      }
      while (model.length > 0) assert.equal(queue.shift(), model.shift());
    }), { numRuns: 60, endOnFailure: true }); // shrinking thousands of operations would take minutes
  });

  it('the pool\'s busy pattern scans only the busy connections, where the published queue scanned every query since', async () => {
    const fixed = busyPattern(await loadQueue(driverRoot()), 10, 200_000);
    assert.ok(fixed.scanned <= 10, `an indexOf looked at ${fixed.scanned} slots for 10 connections`);
    // The empty slots are dropped once they are 1,024 and half the array: it never holds much more than twice that.
    assert.ok(fixed.held <= 2 * 1024 + 10, `the busy queue's array held ${fixed.held} slots`);
    // The same pattern on the published text, so that this test is seen to fail without the fix.
    const published = busyPattern(await loadQueue(publishedCopy(path.join(dir, 'published'))), 10, 20_000);
    assert.ok(published.scanned > 10_000 && published.held > 10_000, `the published queue: ${JSON.stringify(published)}`);
  });

  it('the tool fixes a published copy as the install did, and a second run changes nothing', () => {
    const copy = publishedCopy(path.join(dir, 'fix'));
    assert.throws(() => checkDriverQueue(copy), /lacks this project's fix.*node tools\/patch-driver\.mjs/);
    assert.equal(tool.patchDriver(copy), 'patched');
    assert.deepEqual(queueTexts(copy), queueTexts(driverRoot()));
    assert.equal(tool.patchDriver(copy), 'already patched');
    assert.deepEqual(queueTexts(copy), queueTexts(driverRoot()));
    assert.doesNotThrow(() => checkDriverQueue(copy));
  });

  it('the tool refuses another version, and a queue it does not know, writing nothing', () => {
    const other = publishedCopy(path.join(dir, 'other-version'));
    const pkg = path.join(other, 'package.json');
    fs.writeFileSync(pkg, JSON.stringify({ ...JSON.parse(fs.readFileSync(pkg, 'utf8')), version: '3.4.10' }));
    const before = queueTexts(other);
    assert.throws(() => tool.patchDriver(other), /postgres 3\.4\.10 .*for 3\.4\.9 only/);
    assert.deepEqual(queueTexts(other), before);

    // The second file changed upstream: the first, which the tool knows, is left as it is too.
    const changed = publishedCopy(path.join(dir, 'changed'));
    const second = path.join(changed, tool.QUEUE_FILES[1]!);
    fs.writeFileSync(second, fs.readFileSync(second, 'utf8').replace('xs.indexOf(x)', 'xs.lastIndexOf(x)'));
    const unknown = queueTexts(changed);
    assert.throws(() => tool.patchDriver(changed), /is not the queue\.js of postgres 3\.4\.9/);
    assert.deepEqual(queueTexts(changed), unknown);

    // As npm runs it: exit code 1 and the reason on stderr.
    const run = spawnSync(process.execPath, [TOOL, changed], { encoding: 'utf8' });
    assert.equal(run.status, 1);
    assert.match(run.stderr, /^patch-driver: .*is not the queue\.js/);
  });
});
