/**
 * The page body writer (src/users/page-body.ts) on its own: the answer and
 * its audit ids from the documents as given, growth past its first guess,
 * and the refusals that keep a wrong page from being sent.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { AnswerBuffers } from '../src/http/fast-path/answer-buffers.js';
import { PageBodyWriter } from '../src/users/page-body.js';

const doc = (id: string, padding = 0) => Buffer.from(JSON.stringify({ user_id: id, client_user_id: `c-${'é'.repeat(padding)}` }));

describe('page body writer', () => {
  it('writes the answer and the id array of the documents given, growing past its first guess', () => {
    const buffers = new AnswerBuffers(1024 * 1024);
    const ids = Array.from({ length: 30 }, () => randomUUID());
    const docs = ids.map((id, i) => doc(id, i === 2 ? 30_000 : 3));
    const page = new PageBodyWriter(buffers, 30);
    for (const d of docs) page.add(d);
    const { body, buffer, auditIds } = page.finish('1234', 40);
    assert.equal(body.toString(), `{"users":[${docs.join(',')}],"total":1234,"offset":40,"limit":30}`);
    assert.deepEqual(JSON.parse(auditIds!), ids);
    assert.equal(body.buffer, buffer.buffer, 'the body lies in the buffer to give back');
    assert.ok(buffers.kept > 0, 'the buffer outgrown was given back');
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
    const buffers = new AnswerBuffers(1024 * 1024);
    const page = new PageBodyWriter(buffers, 100);
    page.add(doc(randomUUID()));
    page.abandon();
    const kept = buffers.kept;
    assert.ok(kept > 0);
    page.add(doc(randomUUID()));
    page.abandon();
    assert.equal(buffers.kept, kept);
    assert.throws(() => page.finish('1', 0), /already finished or given back/);
  });
});
