import os from 'node:os';
import { Worker } from 'node:worker_threads';
import { BatchLines, encodeBatch, RecordFile, type EncodedBatch } from './batch.js';
import { ImportError } from './line.js';

/** About this many bytes of input per batch. */
const BATCH_BYTES = 1 << 20;
/**
 * The longest line read before the import gives up on it. The longest valid
 * user (100 sources, every text at its limit and written as \u escapes) is
 * under 3 MB; without a bound, a file that is one huge line (a JSON array
 * given by mistake) would be buffered whole.
 */
const MAX_LINE_BYTES = 16 << 20;
/**
 * Each worker thread holds memory of its own (on this project's 2-core machine the import of a million
 * users peaked at about 250 MB with 2 workers): capped, so that a many-core server does not multiply it.
 */
const MAX_WORKERS = 4;

export type ImportInput = AsyncIterable<string | Uint8Array>;

export interface RawBatch {
  firstLine: number;
  /** Lines, or UTF-8 bytes of whole lines. */
  lines?: string[];
  bytes?: Uint8Array;
  /** Input bytes the batch covers (for progress). */
  size: number;
}

/**
 * The input's lines, checked and encoded batch by batch, in input order.
 * Input items are either lines (strings, as tests and the demo seed give
 * them) or raw bytes in chunks of any size (a file or standard input, as the
 * CLI gives them), not both. The first batch is encoded here; later ones in
 * worker threads, one per core (up to MAX_WORKERS): during this pass
 * PostgreSQL has nothing to do yet, and parsing and checking JSON is most of
 * an import's own work.
 */
export async function* encodedBatches(input: ImportInput, spoolDir: string): AsyncGenerator<EncodedBatch & { size: number }> {
  let pool: WorkerPool | undefined;
  let own: RecordFile | undefined;
  const buffers = new BufferPool();
  const pending: Promise<EncodedBatch & { size: number }>[] = [];
  try {
    for await (const raw of rawBatches(input, buffers)) {
      if (!own) {
        own = new RecordFile(spoolDir, 'users-main');
        pending.push(settledLater(Promise.resolve({ ...encodeRaw(raw, own), size: raw.size })));
        if (raw.bytes) buffers.give(raw.bytes.buffer as ArrayBuffer);
      } else {
        pool ??= new WorkerPool(Math.min(MAX_WORKERS, Math.max(1, os.availableParallelism())), spoolDir);
        pending.push(settledLater(pool.encode(raw).then(({ batch, spare }) => {
          if (spare) buffers.give(spare);
          return { ...batch, size: raw.size };
        })));
      }
      // Batches in flight are bounded: memory stays flat whatever the input's size.
      while (pending.length > (pool?.size ?? 1) * 2) yield await pending.shift()!;
    }
    while (pending.length > 0) yield await pending.shift()!;
  } finally {
    await pool?.close();
    own?.close();
  }
}

/**
 * A batch in flight may fail (a full TMPDIR, say) while the generator waits
 * on the input or on an earlier batch: marked handled now, so that Node does
 * not end the process for an unhandled rejection before the failure is
 * awaited, in order, and reported (and the spool removed).
 */
function settledLater<T>(p: Promise<T>): Promise<T> {
  p.catch(() => {});
  return p;
}

/** Encodes a batch; a problem of one of its lines comes back in the batch (reported in input order), not thrown. */
export function encodeRaw(raw: RawBatch, records: RecordFile): EncodedBatch {
  return encodeBatch(new BatchLines(raw.lines ? { lines: raw.lines } : { bytes: raw.bytes! }, raw.firstLine), records);
}

/**
 * Byte buffers of batches, used again once their batch is encoded: workers
 * hand them back with their results. A new buffer per batch left each
 * thread with tens of megabytes of dead buffers waiting for its next
 * collection (V8 lets about 64 MB of them pile up per thread).
 */
class BufferPool {
  private readonly free: ArrayBuffer[] = [];

  take(min: number): Uint8Array {
    const i = this.free.findIndex((b) => b.byteLength >= min);
    return new Uint8Array(i >= 0 ? this.free.splice(i, 1)[0]! : new ArrayBuffer(Math.max(min, BATCH_BYTES + (BATCH_BYTES >> 2))));
  }

  give(buffer: ArrayBuffer): void {
    if (this.free.length < 16) this.free.push(buffer);
  }
}

async function* rawBatches(input: ImportInput, buffers: BufferPool): AsyncGenerator<RawBatch> {
  let nextLine = 1;
  let lines: string[] = [];
  let textSize = 0;
  const textBatch = (): RawBatch => {
    const batch = { firstLine: nextLine, lines, size: textSize };
    nextLine += lines.length;
    lines = [];
    textSize = 0;
    return batch;
  };
  let buf = buffers.take(BATCH_BYTES);
  let used = 0;
  let scanned = 0;
  for await (const item of input) {
    if (typeof item === 'string') {
      if (used > 0) throw new Error('import input mixes lines and bytes');
      lines.push(item);
      textSize += item.length + 1;
      if (textSize >= BATCH_BYTES) yield textBatch();
      continue;
    }
    if (lines.length > 0) throw new Error('import input mixes lines and bytes');
    for (let at = 0; at < item.length;) {
      const n = Math.min(item.length - at, buf.length - used);
      buf.set(item.subarray(at, at + n), used);
      used += n;
      at += n;
      if (used < BATCH_BYTES && used < buf.length) continue;
      // Bytes before `scanned` hold no newline: each byte is looked at once, however long its line.
      const found = buf.subarray(scanned, used).lastIndexOf(10);
      const cut = found >= 0 ? scanned + found + 1 : 0;
      if (cut === 0) {
        scanned = used;
        // A line longer than a batch so far: read on until the buffer is full, then a buffer twice the size.
        if (used < buf.length) continue;
        if (used >= MAX_LINE_BYTES) throw new ImportError(nextLine, `line longer than ${MAX_LINE_BYTES >> 20} MiB (no valid user comes near it)`);
      } else {
        scanned = used - cut;
      }
      const next = buffers.take(cut === 0 ? buf.length * 2 : Math.max(BATCH_BYTES, used - cut + 1));
      next.set(buf.subarray(cut, used));
      if (cut > 0) {
        const bytes = buf.subarray(0, cut);
        const firstLine = nextLine;
        // Counted before the batch is handed over: its buffer then moves to a worker thread.
        nextLine += countNewlines(bytes);
        yield { firstLine, bytes, size: cut };
      } else {
        buffers.give(buf.buffer as ArrayBuffer);
      }
      buf = next;
      used -= cut;
    }
  }
  if (lines.length > 0) yield textBatch();
  if (used > 0) yield { firstLine: nextLine, bytes: buf.subarray(0, used), size: used };
}

function countNewlines(bytes: Uint8Array): number {
  let n = 0;
  for (let i = bytes.indexOf(10); i >= 0; i = bytes.indexOf(10, i + 1)) n++;
  return n;
}

/**
 * A worker with a young generation of 8 MB instead of V8's 16 MB (semi-space): the
 * import's peak resident set on a million users fell from about 280 to 230 MB, at
 * no measurable cost in speed.
 */
const WORKER_LIMITS = { maxYoungGenerationSizeMb: 8 };

function startWorker(workerData: { spoolDir: string; name: string }): Worker {
  if (!import.meta.url.endsWith('.ts')) return new Worker(new URL('./worker.js', import.meta.url), { workerData, resourceLimits: WORKER_LIMITS });
  // Run from source under tsx (tests, npm run hds): a worker thread does not inherit tsx's loader, so it
  // registers it before loading the worker module.
  const entry = new URL('./worker.ts', import.meta.url).href;
  const tsx = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(tsx)}).then((m) => m.register()).then(() => import(${JSON.stringify(entry)}))`;
  return new Worker(code, { eval: true, workerData, resourceLimits: WORKER_LIMITS });
}

/** Worker threads running src/import/worker.ts; each answers one batch at a time, in turn. */
class WorkerPool {
  private readonly workers: Worker[];
  private readonly waiting = new Map<number, { resolve(r: { batch: EncodedBatch; spare?: ArrayBuffer }): void; reject(e: Error): void }>();
  private nextId = 0;

  constructor(readonly size: number, spoolDir: string) {
    this.workers = Array.from({ length: size }, (_, i) => {
      const worker = startWorker({ spoolDir, name: `users-w${i}` });
      worker.on('message', (m: { id: number; batch?: EncodedBatch; spare?: ArrayBuffer; failure?: string }) => {
        const waiter = this.waiting.get(m.id);
        this.waiting.delete(m.id);
        if (m.batch) waiter?.resolve({ batch: m.batch, ...(m.spare && { spare: m.spare }) });
        else waiter?.reject(new Error(`import worker failed: ${m.failure}`));
      });
      worker.on('error', (err) => this.failAll(err));
      worker.on('exit', (code) => this.failAll(new Error(`import worker exited (code ${code})`)));
      return worker;
    });
  }

  /** Encodes `raw` in a worker; its byte buffer is transferred there and comes back as `spare`. */
  encode(raw: RawBatch): Promise<{ batch: EncodedBatch; spare?: ArrayBuffer }> {
    const id = this.nextId++;
    const worker = this.workers[id % this.workers.length]!;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      worker.postMessage({ id, raw }, raw.bytes ? [raw.bytes.buffer as ArrayBuffer] : []);
    });
  }

  private failAll(err: Error): void {
    for (const waiter of this.waiting.values()) waiter.reject(err);
    this.waiting.clear();
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}
