/**
 * The lookup batcher (src/db/turn-batcher.ts): lookups of one turn share
 * queries of at most SEND_AT, each answer goes to its own lookup, a query
 * that fails fails only the lookups it carried, and a value PostgreSQL
 * refuses fails only its own lookup.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TurnBatcher } from '../src/db/turn-batcher.js';

describe('turn batcher', () => {
  it('sends a turn\'s lookups 16 at a time, as they arrive, and answers each with its own result', async () => {
    const queries: number[][] = [];
    const batcher = new TurnBatcher<number, string>(async (ids) => {
      queries.push(ids);
      return ids.map((id) => `answer ${id}`);
    });
    const asks = Array.from({ length: 40 }, (_, i) => i);
    const pending = asks.map((id) => batcher.load(id));
    // The first two batches went out while the turn was still adding lookups; the rest waits for its end.
    assert.deepEqual(queries.map((q) => q.length), [16, 16]);
    assert.deepEqual(await Promise.all(pending), asks.map((id) => `answer ${id}`));
    assert.deepEqual(queries, [asks.slice(0, 16), asks.slice(16, 32), asks.slice(32)]);
  });

  it('fails only the lookups of the query that failed', async () => {
    const batcher = new TurnBatcher<number, number>(async (ids) => {
      if (ids.includes(20)) throw new Error('connection lost');
      return ids.map((id) => id * 2);
    });
    const results = await Promise.allSettled(Array.from({ length: 40 }, (_, i) => batcher.load(i)));
    const failed = results.flatMap((r, i) => (r.status === 'rejected' ? [i] : []));
    assert.deepEqual(failed, Array.from({ length: 16 }, (_, i) => 16 + i));
    assert.deepEqual(results.slice(0, 16).map((r) => r.status === 'fulfilled' && r.value), Array.from({ length: 16 }, (_, i) => i * 2));
  });

  it('asks again one by one when PostgreSQL refuses a value, so that only its own lookup fails', async () => {
    const queries: string[][] = [];
    const batcher = new TurnBatcher<string, string>(async (ids) => {
      queries.push(ids);
      if (ids.includes('bad')) throw Object.assign(new Error('invalid input syntax for type uuid: "bad"'), { code: '22P02' });
      return ids.map((id) => id.toUpperCase());
    });
    const results = await Promise.allSettled(['a', 'bad', 'c'].map((id) => batcher.load(id)));
    assert.deepEqual(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as { code: string }).code)), ['A', '22P02', 'C']);
    assert.deepEqual(queries, [['a', 'bad', 'c'], ['a'], ['bad'], ['c']]);
  });

  it('answers a lone lookup at the end of its turn', async () => {
    let queries = 0;
    const batcher = new TurnBatcher<string, string>(async (ids) => {
      queries++;
      return ids.map((id) => id.toUpperCase());
    });
    assert.equal(await batcher.load('a'), 'A');
    assert.equal(await batcher.load('b'), 'B');
    assert.equal(queries, 2);
  });
});
