/**
 * The holes of teams' positions kept in memory (src/users/known-holes.ts):
 * the start they give against a count, and how loads are started and kept.
 * The pages they start, against PostgreSQL, are in list-after-changes and
 * page-statement.
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { describe, it } from 'node:test';
import { KnownHoles, startAmongHoles } from '../src/users/known-holes.js';

/**
 * A loader that answers when told to, counting its calls. answer() resolves
 * once what the answers set off has run: the holes kept or dropped, and the
 * load's end noted for the pacing. Those are promise reactions only, no I/O,
 * so they have all run by the next turn of the event loop.
 */
function heldLoader(holes: number[] = [3, 4]) {
  const waiting: (() => void)[] = [];
  let version = 1;
  const loader = {
    calls: 0,
    load: (_teamId: string) => {
      loader.calls++;
      const at = String(version);
      return new Promise<{ version: string; holes: Float64Array }>((resolve) => waiting.push(() => resolve({ version: at, holes: Float64Array.from(holes) })));
    },
    answer: async () => {
      waiting.splice(0).forEach((answer) => answer());
      await new Promise((resolve) => setImmediate(resolve));
    },
    setVersion: (v: number) => { version = v; },
  };
  return loader;
}

describe('holes kept in memory', () => {
  it('start each page at the position of the live user at its offset', () => {
    for (let round = 0; round < 200; round++) {
      const positions = 1 + randomInt(600);
      const holes = Array.from({ length: positions }, (_, i) => i + 1).filter(() => randomInt(4) === 0);
      const live = Array.from({ length: positions }, (_, i) => i + 1).filter((p) => !holes.includes(p));
      for (let offset = 0; offset < live.length; offset++) {
        assert.equal(startAmongHoles(Float64Array.from(holes), offset), live[offset], `holes ${holes.join(',')}, offset ${offset}`);
      }
      // Past the last live user: a start past every live position (an empty page).
      assert.ok(startAmongHoles(Float64Array.from(holes), live.length) > (live.at(-1) ?? 0));
    }
  });

  it('are loaded once per version, one load per team at a time, and only for a team with holes', async () => {
    const loader = heldLoader();
    const known = new KnownHoles(loader.load);
    known.pageRead('a', '1', false);
    assert.equal(loader.calls, 0, 'a team without holes is not loaded');
    known.pageRead('a', '1', true);
    known.pageRead('a', '1', true);
    known.pageRead('a', '2', true);
    assert.equal(loader.calls, 1, 'one load at a time');
    assert.equal(known.startOf('a', 0), undefined, 'nothing kept before the load ends');
    await loader.answer();
    assert.deepEqual(known.startOf('a', 2), { version: '1', start: 5 });
    known.pageRead('a', '1', true);
    assert.equal(loader.calls, 1, 'holes kept at the version read are not loaded again');
    known.pageRead('a', '1', false);
    assert.equal(known.startOf('a', 2), undefined, 'a team whose holes are gone keeps none');
  });

  it('load a team whose version keeps moving at most a tenth of the time', async () => {
    const loader = heldLoader();
    const known = new KnownHoles(loader.load);
    const started = performance.now();
    known.pageRead('a', '1', true);
    // Held 20 ms: the next load may start 9 x 20 ms after this one ended, not before.
    await new Promise((resolve) => setTimeout(resolve, 20));
    await loader.answer();
    let version = 2;
    while (loader.calls === 1) {
      known.pageRead('a', String(version++), true);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // Slack for a timer that fires early.
    assert.ok(performance.now() - started >= 10 * 20 - 10, `the second load started ${performance.now() - started} ms after the first`);
    assert.ok(version > 3, 'pages read meanwhile did not load');
    await loader.answer();
  });

  it('keep at most a million holes, dropping the least recently loaded team', async () => {
    const big = Array.from({ length: 600_000 }, (_, i) => 2 * i + 1);
    const loader = heldLoader(big);
    const known = new KnownHoles(loader.load);
    known.pageRead('a', '1', true);
    known.pageRead('b', '1', true);
    await loader.answer();
    assert.equal(known.startOf('a', 0), undefined, 'the first team is dropped for the second');
    assert.equal(known.startOf('b', 0)?.start, 2);
    const tooBig = heldLoader(Array.from({ length: 1_000_001 }, (_, i) => i + 1));
    const other = new KnownHoles(tooBig.load);
    other.pageRead('c', '1', true);
    await tooBig.answer();
    assert.equal(other.startOf('c', 0), undefined, 'a team with more holes than are kept is left to PostgreSQL');
  });
});
