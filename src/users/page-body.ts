import type { BufferSource } from '../http/fast-path/answer-buffers.js';

const OPEN = Buffer.from('{"users":[');
const COMMA = 0x2c;
const QUOTE = 0x22;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
/**
 * Every stored document starts with its user id, `{"user_id":"` and the 36
 * characters PostgreSQL writes for a uuid: the table's CHECK constraint
 * users_doc_starts_with_id (migrations/006). The audit line writes the ids
 * unescaped (src/http/fast-path/request-log-line.ts).
 */
const ID_PREFIX = Buffer.from('{"user_id":"');
const ID_LENGTH = 36;
const ID_END = ID_PREFIX.length + ID_LENGTH;
/** A first guess at a document's size; the buffer grows when the page needs more. */
const BYTES_PER_USER = 768;
/** `],"total":N,"offset":N,"limit":N}` with numbers of up to 16 digits. */
const CLOSE_ROOM = 80;

/**
 * The bytes of a list answer, `{"users":[...],"total":N,"offset":N,"limit":N}`,
 * written as the page's documents arrive from PostgreSQL, each copied once
 * into one buffer (from `buffers`: given back once the answer is sent), and
 * the audit's JSON array of their ids, taken from each document's first
 * field.
 *
 * The buffer holds the id array first, then the body: each id is copied
 * from the document just written, within the one buffer (copyWithin), and
 * each document with set(): Buffer#copy of a part of a buffer makes a view
 * of it first, two small objects per user that the garbage collector then
 * had to find.
 */
export class PageBodyWriter {
  private buffer: Buffer;
  /** Where the body starts: the id array takes the bytes before it. */
  private readonly bodyStart: number;
  private used: number;
  private idsUsed: number;
  private users = 0;
  /** Given back or finished: a row that still arrives (a read that timed out goes on in PostgreSQL) must not touch the buffer. */
  private closed = false;

  constructor(private readonly buffers: BufferSource, private readonly limit: number) {
    // `[`, then `"` id `",` per user.
    this.bodyStart = 1 + limit * (ID_LENGTH + 3);
    this.buffer = buffers.take(this.bodyStart + OPEN.length + limit * BYTES_PER_USER + CLOSE_ROOM);
    this.buffer[0] = OPEN_BRACKET;
    this.idsUsed = 1;
    this.buffer.set(OPEN, this.bodyStart);
    this.used = this.bodyStart + OPEN.length;
  }

  add(doc: Buffer): void {
    if (this.closed) return;
    // The id array has room for `limit` ids, no more.
    if (this.users === this.limit) throw new Error(`more than ${this.limit} users for a page of ${this.limit}`);
    this.room(doc.length + 1);
    const buffer = this.buffer;
    if (this.users > 0) buffer[this.used++] = COMMA;
    const at = this.used;
    buffer.set(doc, at);
    this.used += doc.length;
    // The constraint's guarantee, checked where it is cheap: the quotes around the id.
    if (doc.length <= ID_END || buffer[at + ID_PREFIX.length - 1] !== QUOTE || buffer[at + ID_END] !== QUOTE) {
      throw new Error('a stored user document does not start with its user_id');
    }
    let ids = this.idsUsed;
    buffer[ids++] = QUOTE;
    buffer.copyWithin(ids, at + ID_PREFIX.length, at + ID_END);
    ids += ID_LENGTH;
    buffer[ids++] = QUOTE;
    buffer[ids++] = COMMA;
    this.idsUsed = ids;
    this.users++;
  }

  /** The answer (in `buffer`, from `buffers`: give it back once sent) and the audit's id array (null for no users). */
  finish(total: string, offset: number): { body: Buffer; buffer: Buffer; auditIds: string | null } {
    if (this.closed) throw new Error('the page was already finished or given back');
    this.closed = true;
    const close = `],"total":${total},"offset":${offset},"limit":${this.limit}}`;
    this.room(close.length);
    this.used += this.buffer.write(close, this.used, 'latin1');
    let auditIds: string | null = null;
    if (this.users > 0) {
      // The last comma closes the array.
      this.buffer[this.idsUsed - 1] = CLOSE_BRACKET;
      auditIds = this.buffer.toString('latin1', 0, this.idsUsed);
    }
    return { body: this.buffer.subarray(this.bodyStart, this.used), buffer: this.buffer, auditIds };
  }

  /** Gives the buffer back unsent (the read failed); rows that arrive later are ignored. */
  abandon(): void {
    if (this.closed) return;
    this.closed = true;
    this.buffers.giveBack(this.buffer);
  }

  private room(bytes: number): void {
    if (this.used + bytes <= this.buffer.length) return;
    const bigger = this.buffers.take(Math.max(this.buffer.length * 2, this.used + bytes));
    bigger.set(this.buffer.subarray(0, this.used), 0);
    // Nothing was sent from the smaller one.
    this.buffers.giveBack(this.buffer);
    this.buffer = bigger;
  }
}
