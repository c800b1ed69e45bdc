/**
 * The keyed batcher (src/db/keyed-batcher.ts): one batch in flight per key,
 * the requests that arrive meanwhile go together in the next one (at most
 * maxBatch), keys do not wait for each other, a failed batch fails only its
 * own requests, and a value PostgreSQL refuses fails only its own request.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KeyedBatcher } from '../src/db/keyed-batcher.js';

/** A batch runner whose batches finish only when the test lets them. */
function heldRunner() {
  const batches: { key: string; requests: number[]; finish: () => void }[] = [];
  const run = (key: string, requests: number[]) =>
    new Promise<number[]>((resolve) => batches.push({ key, requests, finish: () => resolve(requests.map((r) => r * 10)) }));
  return { batches, run };
}

/** Lets every settled promise's callbacks run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('keyed batcher', () => {
  it('sends the first request at once and the ones that arrive during its flight together, at most maxBatch', async () => {
    const { batches, run } = heldRunner();
    const batcher = new KeyedBatcher(run, 3);
    const answers = [1, 2, 3, 4, 5, 6].map((r) => batcher.load('team', r));
    assert.deepEqual(batches.map((b) => b.requests), [[1]]);
    batches[0]!.finish();
    await settle();
    assert.deepEqual(batches.map((b) => b.requests), [[1], [2, 3, 4]]);
    batches[1]!.finish();
    await settle();
    assert.deepEqual(batches.map((b) => b.requests), [[1], [2, 3, 4], [5, 6]]);
    batches[2]!.finish();
    assert.deepEqual(await Promise.all(answers), [10, 20, 30, 40, 50, 60]);
    // Idle again: the next request goes out at once.
    const later = batcher.load('team', 7);
    assert.deepEqual(batches.at(-1)!.requests, [7]);
    batches.at(-1)!.finish();
    assert.equal(await later, 70);
  });

  it('runs different keys at the same time', async () => {
    const { batches, run } = heldRunner();
    const batcher = new KeyedBatcher(run, 64);
    const answers = [batcher.load('a', 1), batcher.load('b', 2), batcher.load('a', 3)];
    assert.deepEqual(batches.map((b) => [b.key, b.requests]), [['a', [1]], ['b', [2]]]);
    for (const b of batches) b.finish();
    await settle();
    assert.deepEqual(batches.map((b) => [b.key, b.requests]), [['a', [1]], ['b', [2]], ['a', [3]]]);
    batches[2]!.finish();
    assert.deepEqual(await Promise.all(answers), [10, 20, 30]);
  });

  it('fails the requests of a failed batch, and goes on with the next', async () => {
    const batcher = new KeyedBatcher<number, number>(async (_key, requests) => {
      if (requests.includes(2)) throw new Error('connection lost');
      return requests.map((r) => r * 10);
    }, 2);
    const results = await Promise.allSettled([1, 2, 3, 4, 5].map((r) => batcher.load('team', r)));
    assert.deepEqual(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message)),
      [10, 'connection lost', 'connection lost', 40, 50]);
  });

  it('asks again one by one, in order, when PostgreSQL refuses a value, so that only its own request fails', async () => {
    const batches: number[][] = [];
    const batcher = new KeyedBatcher<number, number>(async (_key, requests) => {
      batches.push(requests);
      if (requests.includes(3)) throw Object.assign(new Error('date/time field value out of range'), { code: '22008' });
      return requests.map((r) => r * 10);
    }, 64);
    const results = await Promise.allSettled([1, 2, 3, 4].map((r) => batcher.load('team', r)));
    assert.deepEqual(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as { code: string }).code)), [10, 20, '22008', 40]);
    assert.deepEqual(batches, [[1], [2, 3, 4], [2], [3], [4]]);
  });
});
