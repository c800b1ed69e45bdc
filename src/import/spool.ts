import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ImportError } from './line.js';
import { LINK_RECORD_BYTES, type EncodedBatch } from './batch.js';
import type { SourceRef } from '../user-document/document.js';

export { LINK_RECORD_BYTES } from './batch.js';
export { USER_COLUMNS } from '../writes/user-columns.js';

/**
 * Read-ahead per sorted run while the runs are merged, and for all of them:
 * a batch is about a megabyte of input, so ten million users make thousands
 * of runs, and each gets less read-ahead rather than the merge more memory.
 */
const RUN_BUFFER_BYTES = 32 * 1024;
const MERGE_BUFFER_BYTES = 64 << 20;
const MIN_RUN_BUFFER_BYTES = 4096;

export interface SpooledSource extends SourceRef {
  index: number;
  /** First line that describes the source. */
  line: number;
}

/** A batch's users, in list order: `count` records, `bytes` bytes of a spool file from `offset` on. */
interface Run {
  file: number;
  offset: number;
  bytes: number;
  count: number;
}

/**
 * Where the list order's keys lie in a user record's fields (binary COPY
 * fields: an int32 length, then the value): user_id's 16 bytes at 4, team_id's
 * at 24, client_user_id's length at 40, then created_on (int64 microseconds)
 * 8 bytes after its end.
 */
const USER_ID_AT = 4;
const TEAM_ID_AT = 24;
const CLIENT_USER_ID_LENGTH_AT = 40;

/**
 * A run's next record and its list-order key, read out of the record once
 * (a record meets about log2(runs) others in the merge): the team's and the
 * user's uuids as big-endian words (their byte order is PostgreSQL's, and
 * the text order of canonical uuids), created_on's microseconds as a signed
 * high word and an unsigned low one.
 */
class RunHead {
  fields!: Buffer;
  readonly key = new Float64Array(10);

  constructor(readonly reader: RecordReader) {}

  /** Moves to the run's next record; false at its end. */
  advance(): boolean {
    const record = this.reader.next();
    if (!record) return false;
    const f = (this.fields = record.fields);
    const k = this.key;
    for (let i = 0; i < 4; i++) k[i] = f.readUInt32BE(TEAM_ID_AT + 4 * i);
    const at = CLIENT_USER_ID_LENGTH_AT + 8 + f.readInt32BE(CLIENT_USER_ID_LENGTH_AT);
    k[4] = f.readInt32BE(at);
    k[5] = f.readUInt32BE(at + 4);
    for (let i = 0; i < 4; i++) k[6 + i] = f.readUInt32BE(USER_ID_AT + 4 * i);
    return true;
  }
}

/** List order of two runs' next records: team, then created_on, then user_id. */
function before(a: RunHead, b: RunHead): boolean {
  const x = a.key, y = b.key;
  for (let i = 0; i < 10; i++) if (x[i] !== y[i]) return x[i]! < y[i]!;
  return false;
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
  /** The batches' sorted runs of user records, for the bulk path's merge. */
  private readonly runs: Run[] = [];

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
    if (b.users > 0) this.runs.push({ file: this.fileIndex(b.file), offset: b.offset, bytes: b.bytes, count: b.users });

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
   * index of its team: the batches' sorted runs, merged on the keys in the
   * records themselves, so that memory stays flat whatever the file's size.
   * Each run is read ahead sequentially, so the merge costs no read per record.
   */
  *usersInListOrder(): Generator<{ team: number; fields: Buffer }> {
    // A binary min-heap of the runs by their next record (valid until that run's reader moves on).
    const readAhead = Math.max(MIN_RUN_BUFFER_BYTES, Math.min(RUN_BUFFER_BYTES, Math.floor(MERGE_BUFFER_BYTES / Math.max(1, this.runs.length))));
    const heap = this.runs.map((run) => new RunHead(new RecordReader(this.files[run.file]!.fd, run.offset, run.offset + run.bytes, readAhead)))
      .filter((head) => head.advance());
    const less = (i: number, j: number) => before(heap[i]!, heap[j]!);
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
    // Records come grouped by team: its index is looked up when the team changes.
    const teamIndex = new Map(this.teamIds.map((id, i) => [id.replaceAll('-', ''), i]));
    const lastTeam = Buffer.alloc(16);
    let team = -1;
    let yielded = 0;
    while (heap.length > 0) {
      const run = heap[0]!;
      const fields = run.fields;
      if (team < 0 || fields.compare(lastTeam, 0, 16, TEAM_ID_AT, TEAM_ID_AT + 16) !== 0) {
        fields.copy(lastTeam, 0, TEAM_ID_AT, TEAM_ID_AT + 16);
        team = teamIndex.get(lastTeam.toString('hex'))!;
      }
      yield { team, fields };
      yielded++;
      if (!run.advance()) {
        heap[0] = heap[heap.length - 1]!;
        heap.pop();
      }
      if (heap.length > 0) down(0);
    }
    if (yielded !== this.users) throw new Error(`import spool: the runs hold ${yielded} users, not ${this.users}`);
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
