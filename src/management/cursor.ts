import { createHmac, timingSafeEqual } from 'node:crypto';

/** Where a keyset page starts: after the row with this creation time (as the API writes it) and id. */
export interface PageKey {
  createdOn: string;
  id: string;
}

const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?\+00:00$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const MAC_BYTES = 16;

/**
 * The Management API's list cursors: opaque to clients, and signed. A cursor
 * is `<payload>.<mac>`, both base64url: the payload is the page key (the last
 * row's creation time and id), the MAC an HMAC-SHA256 under the
 * organisation's cursor secret (migrations/009) over the list's name and the
 * payload. The name holds what the list is filtered by (the team, the search),
 * so a cursor altered by a client, or made by another list, does not verify
 * and is refused (a 422), never sent to the database as it is.
 */
export class Cursors {
  constructor(private readonly secret: Buffer) {}

  private mac(list: string, payload: string): Buffer {
    return createHmac('sha256', this.secret).update(list).update('\n').update(payload).digest().subarray(0, MAC_BYTES);
  }

  encode(list: string, key: PageKey): string {
    const payload = Buffer.from(JSON.stringify([key.createdOn, key.id])).toString('base64url');
    return `${payload}.${this.mac(list, payload).toString('base64url')}`;
  }

  /** The page key `cursor` holds, or undefined when it was not made by `encode(list, …)` with this secret. */
  decode(list: string, cursor: string): PageKey | undefined {
    const dot = cursor.indexOf('.');
    if (dot <= 0) return undefined;
    const payload = cursor.slice(0, dot);
    const mac = Buffer.from(cursor.slice(dot + 1), 'base64url');
    if (mac.length !== MAC_BYTES || !timingSafeEqual(mac, this.mac(list, payload))) return undefined;
    // Signed by us, so well formed; checked all the same, so that nothing else ever reaches a query.
    let key: unknown;
    try {
      key = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    } catch {
      return undefined;
    }
    if (!Array.isArray(key) || key.length !== 2) return undefined;
    const [createdOn, id] = key as unknown[];
    if (typeof createdOn !== 'string' || !TIME.test(createdOn) || typeof id !== 'string' || !UUID.test(id)) return undefined;
    return { createdOn, id };
  }
}
