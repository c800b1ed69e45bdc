/**
 * The page body writer (src/users/page-body.ts) on its own: the answer and
 * its audit ids from the documents as given, growth past its first guess,
 * and the refusals that keep a wrong page from being sent.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { AnswerBuffers, type BufferSource } from '../src/http/fast-path/answer-buffers.js';
import { PageBodyWriter } from '../src/users/page-body.js';

const doc = (id: string, padding = 0) => Buffer.from(JSON.stringify({ user_id: id, client_user_id: `c-${'é'.repeat(padding)}` }));

/** The same buffers (not only the same bytes), in the same order. */
const sameBuffers = (a: Buffer[], b: Buffer[]) => a.length === b.length && a.every((buffer, i) => buffer === b[i]);

/** A pool that notes the buffers it lends and those given back to it. */
function watchedBuffers(): BufferSource & { taken: Buffer[]; givenBack: Buffer[] } {
  const pool = new AnswerBuffers(1024 * 1024);
  const taken: Buffer[] = [];
  const givenBack: Buffer[] = [];
  return {
    taken, givenBack,
    take: (bytes) => { const b = pool.take(bytes); taken.push(b); return b; },
    giveBack: (buffer) => { givenBack.push(buffer); pool.giveBack(buffer); },
  };
}

describe('page body writer', () => {
  it('writes the answer and the id array of the documents given, growing past its first guess', () => {
    const buffers = watchedBuffers();
    const ids = Array.from({ length: 30 }, () => randomUUID());
    const docs = ids.map((id, i) => doc(id, i === 2 ? 30_000 : 3));
    const page = new PageBodyWriter(buffers, 30);
    for (const d of docs) page.add(d);
    const { body, buffer, auditIds } = page.finish('1234', 40);
    assert.equal(body.toString(), `{"users":[${docs.join(',')}],"total":1234,"offset":40,"limit":30}`);
    assert.deepEqual(JSON.parse(auditIds!), ids);
    assert.equal(body.buffer, buffer.buffer, 'the body lies in the buffer to give back');
    assert.equal(buffer, buffers.taken.at(-1), 'the answer is in the last buffer taken');
    assert.ok(buffers.taken.length > 1 && sameBuffers(buffers.givenBack, buffers.taken.slice(0, -1)), 'the buffers outgrown were given back');
  });

  it('answers an empty page with no audit ids', () => {
    const page = new PageBodyWriter(new AnswerBuffers(0), 100);
    const { body, auditIds } = page.finish('7', 7);
    assert.equal(body.toString(), '{"users":[],"total":7,"offset":7,"limit":100}');
    assert.equal(auditIds, null);
  });

  it('refuses more documents than the page holds, and a document that does not start with its id', () => {
    const full = new PageBodyWriter(new AnswerBuffers(0), 1);
    full.add(doc(randomUUID()));
    assert.throws(() => full.add(doc(randomUUID())), /more than 1 users/);
    const page = new PageBodyWriter(new AnswerBuffers(0), 2);
    assert.throws(() => page.add(Buffer.from(`{"client_user_id":"x","user_id":"${randomUUID()}"}`)), /does not start with its user_id/);
  });

  it('ignores documents that arrive after it was given back, and gives its buffer back once', () => {
    const buffers = watchedBuffers();
    const page = new PageBodyWriter(buffers, 100);
    page.add(doc(randomUUID()));
    page.abandon();
    assert.ok(sameBuffers(buffers.givenBack, buffers.taken), 'its buffer was given back');
    page.add(doc(randomUUID()));
    page.abandon();
    assert.equal(buffers.givenBack.length, 1, 'and only once');
    assert.throws(() => page.finish('1', 0), /already finished or given back/);
  });
});
