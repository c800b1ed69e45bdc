import fs from 'node:fs';
import path from 'node:path';
import { BinaryCopyWriter } from '../db/copy-binary.js';
import { userDocument } from '../user-document/document.js';
import { ImportError, parseImportLine } from './line.js';
import { dateDays, weekOf } from '../user-document/pg-time.js';

/**
 * Lines of an import checked and encoded as a unit, in a worker thread or
 * in the importing thread (src/import/reader.ts). Everything is in
 * transferable buffers and typed arrays, with indexes local to the batch:
 * the spool (src/import/spool.ts) merges batches in file order and
 * maps teams and sources to the import's own indexes.
 */
export interface EncodedBatch {
  /** Users in this batch. */
  users: number;
  /**
   * Where the batch's user records were written (uint32 line, uint32 length,
   * then the USER_COLUMNS fields as binary COPY fields): `bytes` bytes of a
   * spool file of the thread that encoded it, from `offset` on, in list order
   * (team id, created_on, user_id): each batch is a sorted run, and the bulk
   * path merges the runs (src/import/spool.ts).
   */
  file: string;
  offset: number;
  bytes: number;
  /** Link records (LINK_RECORD_BYTES each), with an index into `sources`. */
  links: Uint8Array;
  linkCount: number;
  /** Links per team and week, as triples: index into `teams`, the week's Monday (days since PostgreSQL's epoch), count. */
  linkWeeks: Float64Array;
  teams: string[];
  /** Each distinct description of a source, with the first line of the batch that has it. */
  sources: { slug: string; name: string; logo: string; line: number }[];
  /** The first bad line; the batch holds the users before it. */
  error?: { line: number; reason: string };
}

/** user_id field (20 bytes), source index (uint16), created_on field (12 bytes). */
export const LINK_RECORD_BYTES = 20 + 2 + 12;


/**
 * A spool file of one thread (each encoding thread appends to its own), and
 * the buffer its records are built in, reused from batch to batch: a new
 * buffer per batch handed to another thread left about a hundred megabytes
 * of freed-but-held memory behind on a million users.
 */
export class RecordFile {
  readonly name: string;
  private readonly fd: number;
  private size = 0;
  /** Records as they are encoded, then in list order. */
  readonly out = new BinaryCopyWriter(2 << 20);
  readonly sorted = new BinaryCopyWriter(2 << 20);

  constructor(dir: string, name: string) {
    this.name = name;
    this.fd = fs.openSync(path.join(dir, name), 'w', 0o600);
  }

  /** Appends what `sorted` holds, empties both buffers, and returns where it starts in the file. */
  flush(): number {
    const at = this.size;
    const bytes = this.sorted.buf.subarray(0, this.sorted.length);
    for (let done = 0; done < bytes.length;) done += fs.writeSync(this.fd, bytes, done, bytes.length - done, at + done);
    this.size += bytes.length;
    this.out.length = 0;
    this.sorted.length = 0;
    return at;
  }

  close(): void {
    fs.closeSync(this.fd);
  }
}

/**
 * The lines of a batch: already strings, or UTF-8 bytes decoded piece by
 * piece. Pieces stay under 64 KiB: V8 keeps larger strings in its
 * large-object space until a full collection, and whole 1 MiB batches decoded
 * at once held about a hundred megabytes per worker thread.
 */
export class BatchLines {
  /** The number of the line last yielded. */
  line: number;

  constructor(private readonly source: { lines: string[] } | { bytes: Uint8Array }, readonly firstLine: number) {
    this.line = firstLine - 1;
  }

  /** An upper bound of the number of lines. */
  get count(): number {
    if ('lines' in this.source) return this.source.lines.length;
    let n = 1;
    const b = this.source.bytes;
    for (let i = b.indexOf(10); i >= 0; i = b.indexOf(10, i + 1)) n++;
    return n;
  }

  *[Symbol.iterator](): Generator<string> {
    if ('lines' in this.source) {
      for (const text of this.source.lines) {
        this.line++;
        yield text;
      }
      return;
    }
    const bytes = this.source.bytes;
    for (let start = 0; start < bytes.length;) {
      let end = start + PIECE_BYTES < bytes.length ? bytes.lastIndexOf(10, start + PIECE_BYTES) + 1 : bytes.length;
      if (end <= start) end = Math.max(bytes.indexOf(10, start) + 1, 0) || bytes.length; // a line longer than a piece
      const { text, badLine } = decodeUtf8(bytes.subarray(start, end), this.line + 1);
      start = end;
      for (let at = 0; at < text.length;) {
        let lineEnd = text.indexOf('\n', at);
        if (lineEnd < 0) lineEnd = text.length;
        this.line++;
        yield text.slice(at, lineEnd > at && text.charCodeAt(lineEnd - 1) === 13 /* \r */ ? lineEnd - 1 : lineEnd);
        at = lineEnd + 1;
      }
      if (badLine !== undefined) throw new ImportError(badLine, 'not valid UTF-8');
    }
  }
}

const PIECE_BYTES = 60 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Strict UTF-8: bytes that are not UTF-8 are an error at their line, not
 * silently replaced. For a piece with such a line: the text of the lines
 * before it, which are still checked (an earlier bad line is the one
 * reported), and its number.
 */
function decodeUtf8(bytes: Uint8Array, firstLine: number): { text: string; badLine?: number } {
  try {
    return { text: utf8.decode(bytes) };
  } catch {
    let line = firstLine;
    for (let start = 0; start < bytes.length; line++) {
      let end = bytes.indexOf(10, start);
      if (end < 0) end = bytes.length;
      try {
        utf8.decode(bytes.subarray(start, end));
      } catch {
        return { text: utf8.decode(bytes.subarray(0, start)), badLine: line };
      }
      start = end + 1;
    }
    throw new ImportError(firstLine, 'not valid UTF-8');
  }
}

/**
 * A team's weeks as one number, team * WEEK_KEYS + week + WEEK_KEY_OFFSET: the weeks of
 * years 1000 to 9999 (days -365,000 to 2,920,000 from PostgreSQL's epoch) fit in WEEK_KEYS.
 */
const WEEK_KEYS = 2 ** 23;
const WEEK_KEY_OFFSET = 2 ** 22;

function weekTriples(weekLinks: Map<number, number>): Float64Array {
  const out = new Float64Array(weekLinks.size * 3);
  let i = 0;
  for (const [key, count] of weekLinks) {
    out[i++] = Math.floor(key / WEEK_KEYS);
    out[i++] = (key % WEEK_KEYS) - WEEK_KEY_OFFSET;
    out[i++] = count;
  }
  return out;
}

/** Checks and encodes a batch of lines, writing the user records to `records`. */
export function encodeBatch(lines: BatchLines, records: RecordFile): EncodedBatch {
  const w = records.out;
  const l = new BinaryCopyWriter(64 * 1024);
  const lineCount = lines.count;
  const team = new Uint32Array(lineCount), micros = new Uint32Array(lineCount), recordStart = new Uint32Array(lineCount + 1);
  const seconds = new Float64Array(lineCount), uid = new Uint32Array(lineCount * 4);
  const teams = new Map<string, number>();
  const sources = new Map<string, number[]>();
  const sourceList: EncodedBatch['sources'] = [];
  let users = 0;
  let linkCount = 0;
  const weekLinks = new Map<number, number>();
  let lastTeamId = '';
  let lastTeam = 0;
  let error: EncodedBatch['error'];

  try {
    for (let line of lines) {
      const lineNo = lines.line;
      // A byte order mark (Windows tools write one) opens the file, not its first user.
      if (lineNo === 1 && line.charCodeAt(0) === 0xfeff) line = line.slice(1);
      if (line.length === 0 || (line.charCodeAt(0) <= 32 && line.trim() === '')) continue;
      const u = parseImportLine(line, lineNo);

      // Lines of one team often come in runs: compare with the last one's before hashing the id.
      let t = u.team_id === lastTeamId ? lastTeam : teams.get(u.team_id);
      if (t === undefined) teams.set(u.team_id, (t = teams.size));
      lastTeamId = u.team_id;
      lastTeam = t;
      recordStart[users] = w.length;
      w.uint32(lineNo);
      w.uint32(0);
      const fieldsStart = w.length;
      w.uuid(u.user_id);
      w.uuid(u.team_id);
      w.text(u.client_user_id);
      w.timestamptz(u.created_on);
      const tz = u.fallback_time_zone;
      w.text(tz && tz.id);
      w.text(tz && tz.source_slug);
      w.timestamptz(tz && tz.updated_at);
      const bd = u.fallback_birth_date;
      w.date(bd && dateDays(bd.value));
      w.text(bd && bd.source_slug);
      w.timestamptz(bd && bd.updated_at);
      w.date(u.ingestion_start === null ? null : dateDays(u.ingestion_start));
      w.date(u.ingestion_end === null ? null : dateDays(u.ingestion_end));
      w.text(userDocument(u));
      w.buf.writeUInt32BE(w.length - fieldsStart, fieldsStart - 4);

      team[users] = t;
      seconds[users] = u.created_on.seconds;
      micros[users] = u.created_on.micros;
      for (let k = 0; k < 4; k++) uid[users * 4 + k] = w.buf.readUInt32BE(fieldsStart + 4 + k * 4);
      users++;
      recordStart[users] = w.length;

      for (const cs of u.connected_sources) {
        const s = cs.source;
        // By slug, then the description: a file describes each source one way (else the spool reports it).
        const described = sources.get(s.slug);
        let index = described?.find((i) => sourceList[i]!.name === s.name && sourceList[i]!.logo === s.logo);
        if (index === undefined) {
          index = sourceList.length;
          sourceList.push({ slug: s.slug, name: s.name, logo: s.logo, line: lineNo });
          if (described) described.push(index);
          else sources.set(s.slug, [index]);
        }
        l.raw(w.buf, fieldsStart, fieldsStart + 20); // the user_id field, as just encoded
        l.uint16(index);
        l.timestamptz(cs.created_on);
        linkCount++;
        const week = t * WEEK_KEYS + weekOf(cs.created_on) + WEEK_KEY_OFFSET;
        weekLinks.set(week, (weekLinks.get(week) ?? 0) + 1);
      }
    }
  } catch (err) {
    if (!(err instanceof ImportError)) throw err;
    error = { line: err.line, reason: err.reason };
  }
  const order = listOrder(users, [...teams.keys()], team, seconds, micros, uid);
  const sorted = records.sorted;
  for (const i of order) sorted.raw(w.buf, recordStart[i]!, recordStart[i + 1]!);
  const bytes = sorted.length;
  return {
    users,
    file: records.name,
    offset: records.flush(),
    bytes,
    links: l.take(),
    linkCount,
    linkWeeks: weekTriples(weekLinks),
    teams: [...teams.keys()],
    sources: sourceList,
    ...(error && { error }),
  };
}

/** The batch's users in list order. */
function listOrder(n: number, teamIds: string[], team: Uint32Array, seconds: Float64Array, micros: Uint32Array, uid: Uint32Array): Uint32Array {
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  return order.sort(listOrderComparator(teamRanks(teamIds), team, seconds, micros, uid));
}

/** Rank of each team (by index) in the order of its id as text, which orders canonical uuids as PostgreSQL does. */
function teamRanks(teamIds: string[]): Uint32Array {
  const rank = new Uint32Array(teamIds.length);
  teamIds.map((id, i) => [id, i] as const).sort((a, b) => (a[0] < b[0] ? -1 : 1)).forEach(([, i], r) => (rank[i] = r));
  return rank;
}

/**
 * Compares users a and b (indexes into the key arrays) in list order: team
 * (by `rank` of its index in `team`), then created_on, then user_id (as
 * PostgreSQL orders uuids: byte by byte).
 */
function listOrderComparator(
  rank: Uint32Array, team: Uint32Array, seconds: Float64Array, micros: Uint32Array, uid: Uint32Array,
): (a: number, b: number) => number {
  return (a, b) => rank[team[a]!]! - rank[team[b]!]! || seconds[a]! - seconds[b]! || micros[a]! - micros[b]!
    || uid[a * 4]! - uid[b * 4]! || uid[a * 4 + 1]! - uid[b * 4 + 1]! || uid[a * 4 + 2]! - uid[b * 4 + 2]! || uid[a * 4 + 3]! - uid[b * 4 + 3]!;
}

