import { once } from 'node:events';
import type { Writable } from 'node:stream';

/**
 * PostgreSQL's binary COPY format, written by hand for bulk loads: the
 * server reads typed values as they are (no text parsing of timestamps and
 * uuids), which halved the server's time per imported row.
 * Decision: docs/decisions/bulk-import-binary-copy.md
 *
 * A stream is COPY_HEADER, then tuples (int16 field count, then per field an
 * int32 byte length, -1 for NULL, and the bytes), then COPY_TRAILER.
 */

export const COPY_HEADER = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8)]);
export const COPY_TRAILER = Buffer.from([0xff, 0xff]);

const TWO_32 = 4294967296;

/** Value of each hexadecimal digit by character code; -1 for anything else. */
const HEX = new Int8Array(128).fill(-1);
for (let c = 0; c < 10; c++) HEX[48 + c] = c;
for (let c = 0; c < 6; c++) HEX[97 + c] = HEX[65 + c] = 10 + c;

/** Tuples in the binary COPY format, written into one growing buffer. */
export class BinaryCopyWriter {
  buf: Buffer;
  length = 0;

  constructor(initialBytes = 1 << 20) {
    this.buf = Buffer.allocUnsafe(initialBytes);
  }

  private ensure(bytes: number): void {
    if (this.length + bytes <= this.buf.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + bytes));
    this.buf.copy(bigger, 0, 0, this.length);
    this.buf = bigger;
  }

  /** Starts a tuple of `fields` fields. */
  tuple(fields: number): void {
    this.ensure(2);
    this.buf.writeInt16BE(fields, this.length);
    this.length += 2;
  }

  null(): void {
    this.ensure(4);
    this.buf.writeInt32BE(-1, this.length);
    this.length += 4;
  }

  /** A uuid from its canonical text form (8-4-4-4-12 hex digits, either case). */
  uuid(text: string): void {
    if (text.length !== 36) throw new Error(`not a uuid: ${text}`);
    this.ensure(20);
    const b = this.buf;
    let at = this.length;
    b.writeInt32BE(16, at);
    at += 4;
    // By table, in JavaScript: Buffer's own hex decoding costs more per call than 32 characters do.
    for (let i = 0; i < 36; i += 2) {
      if (i === 8 || i === 13 || i === 18 || i === 23) {
        if (text.charCodeAt(i) !== 45 /* - */) throw new Error(`not a uuid: ${text}`);
        i++;
      }
      const high = HEX[text.charCodeAt(i)] ?? -1, low = HEX[text.charCodeAt(i + 1)] ?? -1;
      if (high < 0 || low < 0) throw new Error(`not a uuid: ${text}`);
      b[at++] = (high << 4) | low;
    }
    this.length = at;
  }

  text(value: string | null): void {
    if (value === null) return this.null();
    const n = value.length;
    this.ensure(4 + n * 3);
    const b = this.buf;
    const start = this.length + 4;
    // Short ASCII text byte by byte here: a call into Buffer's UTF-8 writer costs about 200 ns whatever
    // the length, and most fields (ids, slugs, zones) are a few dozen ASCII characters.
    if (n <= 64) {
      let i = 0;
      for (; i < n; i++) {
        const c = value.charCodeAt(i);
        if (c >= 0x80) break;
        b[start + i] = c;
      }
      if (i === n) {
        b.writeInt32BE(n, this.length);
        this.length = start + n;
        return;
      }
    }
    const written = b.write(value, start);
    b.writeInt32BE(written, this.length);
    this.length = start + written;
  }

  int4(value: number): void {
    this.ensure(8);
    this.buf.writeInt32BE(4, this.length);
    this.buf.writeInt32BE(value, this.length + 4);
    this.length += 8;
  }

  int8(value: number): void {
    this.ensure(12);
    this.buf.writeInt32BE(8, this.length);
    this.writeInt64(value, this.length + 4);
    this.length += 12;
  }

  /** A timestamptz: whole seconds since PostgreSQL's epoch (2000-01-01 UTC), and microseconds. */
  timestamptz(value: { seconds: number; micros: number } | null): void {
    if (value === null) return this.null();
    const { seconds, micros } = value;
    this.ensure(12);
    this.buf.writeInt32BE(8, this.length);
    // Exact in a double up to about 285 years from 2000; beyond, BigInt keeps every microsecond.
    if (Math.abs(seconds) < 9e9) this.writeInt64(seconds * 1e6 + micros, this.length + 4);
    else this.buf.writeBigInt64BE(BigInt(seconds) * 1_000_000n + BigInt(micros), this.length + 4);
    this.length += 12;
  }

  /** A date, as days since PostgreSQL's epoch (src/user-document/pg-time.ts: dateDays). */
  date(days: number | null): void {
    if (days === null) return this.null();
    this.int4(days);
  }

  /** Bytes already in this format (a field or a run of fields), copied as they are. */
  raw(bytes: Buffer, start = 0, end = bytes.length): void {
    this.ensure(end - start);
    bytes.copy(this.buf, this.length, start, end);
    this.length += end - start;
  }

  /** A big-endian uint32 with no length prefix (records of our own, not a COPY field). */
  uint32(value: number): void {
    this.ensure(4);
    this.buf.writeUInt32BE(value, this.length);
    this.length += 4;
  }

  /** A big-endian uint16 with no length prefix (records of our own, not a COPY field). */
  uint16(value: number): void {
    this.ensure(2);
    this.buf.writeUInt16BE(value, this.length);
    this.length += 2;
  }

  /** An exact integer (|value| < 2^53) as a big-endian int64. */
  private writeInt64(value: number, at: number): void {
    const high = Math.floor(value / TWO_32);
    this.buf.writeInt32BE(high, at);
    this.buf.writeUInt32BE(value - high * TWO_32, at + 4);
  }

  /** The bytes written so far, handed over (streams may hold on to them), and a fresh buffer. */
  take(): Buffer {
    const out = this.buf.subarray(0, this.length);
    this.buf = Buffer.allocUnsafe(this.buf.length);
    this.length = 0;
    return out;
  }
}

/**
 * A whole binary COPY stream (header, a tuple per item written by `write`,
 * trailer) in chunks of about `chunkBytes`, for writeCopy.
 */
export function* copyTuples<T>(items: Iterable<T>, write: (out: BinaryCopyWriter, item: T) => void, chunkBytes = 1 << 20): Generator<Buffer> {
  const out = new BinaryCopyWriter(chunkBytes * 2);
  out.raw(COPY_HEADER);
  for (const item of items) {
    write(out, item);
    if (out.length >= chunkBytes) yield out.take();
  }
  out.raw(COPY_TRAILER);
  yield out.take();
}

/**
 * Streams `chunks` (COPY_HEADER, tuples, COPY_TRAILER) into a COPY ... FROM
 * STDIN stream, waiting when it is full, and resolves once PostgreSQL has
 * taken all of it. An error PostgreSQL raises mid-stream rejects.
 */
export async function writeCopy(stream: Writable, chunks: Iterable<Buffer>): Promise<void> {
  let failed: Error | undefined;
  // Without a listener, an error PostgreSQL raises mid-COPY would crash the process instead of failing the import.
  stream.on('error', (err: Error) => { failed ??= err; });
  try {
    for (const chunk of chunks) {
      if (failed) throw failed;
      if (!stream.write(chunk)) await once(stream, 'drain');
    }
  } catch (err) {
    stream.destroy(err as Error);
    throw err;
  }
  await new Promise<void>((resolve, reject) => stream.end((err?: Error | null) => (err ? reject(err) : resolve())));
  if (failed) throw failed;
}
