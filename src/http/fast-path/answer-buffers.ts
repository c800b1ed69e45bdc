/**
 * Buffers for large answers (list pages), used again once the answer that
 * held one has been sent.
 *
 * Why: a page of 100 users is a 64 KB body. Allocated afresh for every page
 * it is memory outside V8's heap, and V8 answers every 64 MB of that with a
 * full mark of the heap: with the page cache off, about four of them a
 * second, and the mark, not the page, was what the process spent most on
 * (issue 19's profiles). Used again, the same few buffers carry every page.
 * Decision: docs/decisions/fast-path-hand-made-code.md
 *
 * The rule it relies on: a buffer is given back only when nothing will read
 * it again. The answer's bytes are handed to the socket without a copy, and
 * libuv reads them until the write completes, which may be long after the
 * handler returned when the client reads slowly; so an answer's buffer is
 * given back on its response's 'close' event, which Node emits after the
 * write completed or was cancelled with the connection (giveBackOnClose).
 * A buffer given back twice would be handed to two answers at once, so
 * that is refused loudly. test/answer-buffers.test.ts pipelines large pages
 * to a client that does not read while other clients are answered, then
 * checks every byte it finally reads.
 */
import type { FastifyReply } from 'fastify';

/** Smaller buffers come from Node's own pool and cost nothing to drop. */
const SMALLEST = 16 * 1024;

export interface BufferSource {
  /** A buffer of at least `bytes`, its content undefined. */
  take(bytes: number): Buffer;
  /** `buffer`, from take(), is no longer read by anyone. */
  giveBack(buffer: Buffer): void;
}

/** Plain allocation: for callers whose buffers are not sent as answers (tools, tests). */
export const FRESH_BUFFERS: BufferSource = { take: (bytes) => Buffer.allocUnsafe(bytes), giveBack: () => {} };

export class AnswerBuffers implements BufferSource {
  /** Free buffers by size (powers of two from SMALLEST). */
  private readonly free = new Map<number, Buffer[]>();
  private readonly isFree = new WeakSet<Buffer>();
  private freeBytes = 0;

  /** Keeps at most `maxFreeBytes` of buffers for later; more given back are left to the garbage collector. */
  constructor(private readonly maxFreeBytes: number) {}

  take(bytes: number): Buffer {
    if (bytes < SMALLEST) return Buffer.allocUnsafe(bytes);
    const size = 2 ** Math.ceil(Math.log2(bytes));
    const buffer = this.free.get(size)?.pop();
    if (!buffer) return Buffer.allocUnsafeSlow(size);
    this.isFree.delete(buffer);
    this.freeBytes -= size;
    return buffer;
  }

  giveBack(buffer: Buffer): void {
    const size = buffer.length;
    if (size < SMALLEST || buffer.byteOffset !== 0 || size !== buffer.buffer.byteLength || (size & (size - 1)) !== 0) return;
    if (this.isFree.has(buffer)) throw new Error('an answer buffer was given back twice');
    if (this.freeBytes + size > this.maxFreeBytes) return;
    let list = this.free.get(size);
    if (!list) this.free.set(size, (list = []));
    list.push(buffer);
    this.isFree.add(buffer);
    this.freeBytes += size;
  }
}

/** Gives `buffer` back once the response of `reply` is closed: sent in full, or its connection gone. */
export function giveBackOnClose(reply: FastifyReply, buffers: BufferSource, buffer: Buffer): void {
  reply.raw.once('close', () => buffers.giveBack(buffer));
}
