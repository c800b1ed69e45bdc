import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ImportError } from './line.js';
import { LINK_RECORD_BYTES, listOrderComparator, teamRanks, type EncodedBatch } from './batch.js';
import type { SourceRef } from '../user-document/document.js';

export { LINK_RECORD_BYTES } from './batch.js';
export { USER_COLUMNS } from '../writes/user-columns.js';

/**
 * Beyond this many users the sort keys of the bulk path (32 bytes per user)
 * are no longer kept, and the import merges instead, with memory flat.
 */
const MAX_KEYED_USERS = 4_000_000;
/** Read-ahead per sorted run while the runs are merged. */
const RUN_BUFFER_BYTES = 32 * 1024;

export interface SpooledSource extends SourceRef {
  index: number;
  /** First line that describes the source. */
  line: number;
}

/** A batch's users, in list order: keys [start, start + count) and their records in a spool file. */
interface Run {
  file: number;
  offset: number;
  bytes: number;
  start: number;
  count: number;
}

/**
 * What the bulk path needs to put users in list order: per user, its team
 * and (created_on, user_id) as numbers that compare like PostgreSQL's
 * values, grouped in runs (batches) that are each in list order already.
 */
export class SortKeys {
  count = 0;
  team = new Uint32Array(1024);
  seconds = new Float64Array(1024);
  micros = new Uint32Array(1024);
  /** user_id as four big-endian 32-bit words: numeric order is PostgreSQL's uuid (byte) order. */
  uid = new Uint32Array(4096);
  readonly runs: Run[] = [];

  private grow(): void {
    const twice = <T extends Uint32Array | Float64Array>(a: T): T => {
      const b = new (a.constructor as new (n: number) => T)(a.length * 2);
      b.set(a);
      return b;
    };
    this.team = twice(this.team);
    this.seconds = twice(this.seconds);
    this.micros = twice(this.micros);
    this.uid = twice(this.uid);
  }

  /** Appends a batch's keys as a run; `teamOf` maps its team indexes to the import's. */
  append(b: EncodedBatch, teamOf: Uint32Array, file: number): void {
    while (this.count + b.users > this.team.length) this.grow();
    const n = this.count;
    for (let i = 0; i < b.users; i++) this.team[n + i] = teamOf[b.team[i]!]!;
    this.seconds.set(b.seconds, n);
    this.micros.set(b.micros, n);
    this.uid.set(b.uid, n * 4);
    this.count += b.users;
    if (b.users > 0) this.runs.push({ file, offset: b.offset, bytes: b.bytes, start: n, count: b.users });
  }
}

/**
 * Removes the spool directories of imports whose process is gone: a killed
 * import leaves as much as its input behind (156 MB for 200,000 users), and
 * nothing else would ever remove it.
 */
function removeAbandonedSpools(tmp: string): void {
  let names: string[];
  try {
    names = fs.readdirSync(tmp);
  } catch {
    return;
  }
  for (const name of names) {
    const pid = Number(/^hds-import-(\d+)-/.exec(name)?.[1]);
    if (!pid || pid === process.pid || processExists(pid)) continue;
    fs.rmSync(path.join(tmp, name), { recursive: true, force: true });
  }
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, as another user's.
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/**
 * The first pass of an import: every checked user, already in PostgreSQL's
 * binary COPY form (src/import/batch.ts), in spool files of a private
 * temporary directory (one per encoding thread), so that the input (a file
 * or standard input) is read and checked once whichever way it is then
 * written. Records: uint32 line, uint32 length, then the USER_COLUMNS
 * fields. Links (one per connected source) go to a file of their own as
 * fixed-size records, in input order.
 */
export class ImportSpool {
  users = 0;
  links = 0;
  readonly teams = new Map<string, number>();
  readonly teamIds: string[] = [];
  readonly sources = new Map<string, SpooledSource>();
  readonly sourceList: SpooledSource[] = [];
  /** Links per team and week: by the import's team index, then the week's Monday (days since PostgreSQL's epoch). */
  readonly linkWeeks = new Map<number, Map<number, number>>();
  /** Null once the file has more users than the bulk path keeps keys for. */
  keys: SortKeys | null = new SortKeys();

  /** The encoding threads' spool files, in the order they were first seen, with a descriptor to read each. */
  private readonly files: { name: string; fd: number }[] = [];
  private closed = false;

  private constructor(readonly dir: string, private readonly linkFd: number) {}

  static create(): ImportSpool {
    removeAbandonedSpools(os.tmpdir());
    // Named by this process: an import killed before it could remove its spool (SIGKILL, out of memory) is found by the next one.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `hds-import-${process.pid}-`));
    return new ImportSpool(dir, fs.openSync(path.join(dir, 'links'), 'w+', 0o600));
  }

  private fileIndex(name: string): number {
    const known = this.files.findIndex((f) => f.name === name);
    if (known >= 0) return known;
    return this.files.push({ name, fd: fs.openSync(path.join(this.dir, name), 'r') }) - 1;
  }

  /**
   * Adds the next batch of the file (batches must come in file order), and
   * throws the first problem of the file so far: a bad line, or a source
   * described differently than on an earlier line.
   */
  addBatch(b: EncodedBatch): void {
    // The batch's sources: its links refer to them by the batch's index; rewritten to the import's.
    const sourceOf = new Uint16Array(b.sources.length);
    let conflict: ImportError | undefined;
    for (const [i, s] of b.sources.entries()) {
      const known = this.sources.get(s.slug);
      if (!known) sourceOf[i] = this.addSource(s).index;
      else if (known.name === s.name && known.logo === s.logo) sourceOf[i] = known.index;
      else if (!conflict || s.line < conflict.line) {
        conflict = new ImportError(s.line, `source ${JSON.stringify(s.slug)} has another name or logo on line ${known.line}`);
      }
    }
    if (conflict && (!b.error || conflict.line < b.error.line)) throw conflict;
    if (b.error) throw new ImportError(b.error.line, b.error.reason);

    const teamOf = new Uint32Array(b.teams.length);
    for (const [i, id] of b.teams.entries()) {
      let team = this.teams.get(id);
      if (team === undefined) this.teams.set(id, (team = this.teamIds.push(id) - 1));
      teamOf[i] = team;
    }
    if (this.keys && this.keys.count + b.users > MAX_KEYED_USERS) this.keys = null;
    this.keys?.append(b, teamOf, this.fileIndex(b.file));

    const links = Buffer.from(b.links.buffer, b.links.byteOffset, b.links.length);
    for (let at = 20; at < links.length; at += LINK_RECORD_BYTES) links.writeUInt16BE(sourceOf[links.readUInt16BE(at)]!, at);
    for (let done = 0; done < links.length;) done += fs.writeSync(this.linkFd, links, done);
    for (let i = 0; i < b.linkWeeks.length; i += 3) {
      const team = teamOf[b.linkWeeks[i]!]!;
      let weeks = this.linkWeeks.get(team);
      if (!weeks) this.linkWeeks.set(team, (weeks = new Map()));
      weeks.set(b.linkWeeks[i + 1]!, (weeks.get(b.linkWeeks[i + 1]!) ?? 0) + b.linkWeeks[i + 2]!);
    }
    this.users += b.users;
    this.links += b.linkCount;
  }

  private addSource(s: SourceRef & { line: number }): SpooledSource {
    if (this.sourceList.length === 0xffff) throw new ImportError(s.line, 'more than 65535 distinct sources in one file');
    const added: SpooledSource = { slug: s.slug, name: s.name, logo: s.logo, index: this.sourceList.length, line: s.line };
    this.sourceList.push(added);
    this.sources.set(s.slug, added);
    return added;
  }

  /** Every user record, spool file after spool file: (line, the fields' bytes). */
  *userRecords(): Generator<{ line: number; fields: Buffer }> {
    for (const { fd } of this.files) {
      const reader = new RecordReader(fd, 0, fs.fstatSync(fd).size, 1 << 20);
      for (let r = reader.next(); r; r = reader.next()) yield r;
    }
  }

  /**
   * Every user record in list order (team id, created_on, user_id), with the
   * index of its team: the sorted runs of `keys`, merged. Each run is read
   * ahead sequentially, so the merge costs no read per record.
   */
  *usersInListOrder(keys: SortKeys): Generator<{ team: number; fields: Buffer }> {
    const { team, seconds, micros, uid } = keys;
    const compare = listOrderComparator(teamRanks(this.teamIds), team, seconds, micros, uid);
    // A binary min-heap of the runs by their next user.
    const heap = keys.runs.map((run) => ({ at: run.start, end: run.start + run.count, reader: new RecordReader(this.files[run.file]!.fd, run.offset, run.offset + run.bytes, RUN_BUFFER_BYTES) }));
    const less = (i: number, j: number) => compare(heap[i]!.at, heap[j]!.at) < 0;
    const down = (i: number) => {
      for (;;) {
        const l = 2 * i + 1, r = l + 1;
        let m = i;
        if (l < heap.length && less(l, m)) m = l;
        if (r < heap.length && less(r, m)) m = r;
        if (m === i) return;
        [heap[i], heap[m]] = [heap[m]!, heap[i]!];
        i = m;
      }
    };
    for (let i = (heap.length >> 1) - 1; i >= 0; i--) down(i);
    while (heap.length > 0) {
      const run = heap[0]!;
      const record = run.reader.next();
      if (!record) throw new Error('import spool: a run ended before its keys');
      yield { team: team[run.at]!, fields: record.fields };
      if (++run.at < run.end) down(0);
      else {
        heap[0] = heap[heap.length - 1]!;
        heap.pop();
        down(0);
      }
    }
  }

  /** The link records in file order; each view is LINK_RECORD_BYTES long. */
  *linkRecords(): Generator<Buffer> {
    const size = fs.fstatSync(this.linkFd).size;
    const chunk = Buffer.allocUnsafe(LINK_RECORD_BYTES * 25_000);
    for (let position = 0; position < size;) {
      const read = fs.readSync(this.linkFd, chunk, 0, Math.min(chunk.length, size - position), position);
      if (read === 0 || read % LINK_RECORD_BYTES !== 0) throw new Error('import spool: truncated link record');
      for (let at = 0; at < read; at += LINK_RECORD_BYTES) yield chunk.subarray(at, at + LINK_RECORD_BYTES);
      position += read;
    }
  }

  /** Removes the temporary files; safe to call more than once. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const { fd } of this.files) fs.closeSync(fd);
    fs.closeSync(this.linkFd);
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * User records of bytes [start, end) of a spool file, read ahead `chunk`
 * bytes at a time. A record's view is valid until the next call.
 */
class RecordReader {
  private buf: Buffer;
  private from = 0;
  private to = 0;

  constructor(private readonly fd: number, private position: number, private readonly end: number, chunk: number) {
    this.buf = Buffer.allocUnsafe(Math.min(chunk, Math.max(end - position, 8)));
  }

  next(): { line: number; fields: Buffer } | undefined {
    if (!this.ensure(8)) return undefined;
    const line = this.buf.readUInt32BE(this.from);
    const length = this.buf.readUInt32BE(this.from + 4);
    if (!this.ensure(8 + length)) throw new Error('import spool: truncated record');
    const fields = this.buf.subarray(this.from + 8, this.from + 8 + length);
    this.from += 8 + length;
    return { line, fields };
  }

  /** Makes `n` unread bytes available; false at the end of the range. */
  private ensure(n: number): boolean {
    if (this.to - this.from >= n) return true;
    if (this.to - this.from === 0 && this.position >= this.end) return false;
    if (n > this.buf.length) {
      const bigger = Buffer.allocUnsafe(n);
      this.buf.copy(bigger, 0, this.from, this.to);
      this.buf = bigger;
    } else {
      this.buf.copy(this.buf, 0, this.from, this.to);
    }
    this.to -= this.from;
    this.from = 0;
    while (this.to < n && this.position < this.end) {
      const read = fs.readSync(this.fd, this.buf, this.to, Math.min(this.buf.length - this.to, this.end - this.position), this.position);
      if (read === 0) break;
      this.to += read;
      this.position += read;
    }
    return this.to >= n;
  }
}
