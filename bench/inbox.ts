import http from 'node:http';
import type { AddressInfo } from 'node:net';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The webhook benches' receiver, on the loopback: answers 204 at once, and
 * notes when each webhook-id first arrived (with the user_id its body
 * names) and how many requests came.
 */
export class Inbox {
  readonly arrivals = new Map<string, { at: number; userId: string }>();
  requests = 0;
  private server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      this.requests++;
      const id = String(req.headers['webhook-id']);
      if (!this.arrivals.has(id)) {
        const body = Buffer.concat(chunks).toString();
        this.arrivals.set(id, { at: performance.timeOrigin + performance.now(), userId: /"user_id":"([0-9a-f-]{36})"/.exec(body)?.[1] ?? '' });
      }
      res.writeHead(204).end();
    });
  });

  /** Listens on a free port of 127.0.0.1; answers the endpoint's URL. */
  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }

  reset(): void {
    this.arrivals.clear();
    this.requests = 0;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /**
   * Waits until `count` distinct webhook-ids have arrived (or `timeoutMs`
   * passed), calling `waiting` every 30 s meanwhile; returns when the last
   * of them arrived.
   */
  async until(count: number, timeoutMs: number, waiting?: (arrived: number) => void): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    let report = Date.now() + 30_000;
    while (this.arrivals.size < count && Date.now() < deadline) {
      await sleep(5);
      if (waiting && Date.now() >= report) {
        waiting(this.arrivals.size);
        report += 30_000;
      }
    }
    // A loop, not Math.max(...all): a backlog's 100,000 arguments overflow the stack.
    let last = 0;
    for (const a of this.arrivals.values()) if (a.at > last) last = a.at;
    return last;
  }
}
