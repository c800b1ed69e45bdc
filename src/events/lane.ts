import { errorCode } from '../db/errors.js';
import { messageId } from '../management/message-store.js';
import { claimMessages, recordOutcomes, type ClaimedEndpoint, type ClaimedMessage, type Outcome } from './claims.js';
import type { Dispatcher } from './dispatcher.js';
import type { Sender } from './send.js';
import { signatures } from './signature.js';

/** Attempts in flight per endpoint and instance. */
export const MAX_IN_FLIGHT = 32;
/**
 * Messages a lane holds at once: in flight, claimed and waiting to be sent,
 * or sent with their outcome not yet written. Twice the attempts in flight,
 * so that the next claim is made while attempts run, not after them; a
 * waiting message then waits for at most one attempt in flight to end
 * (≤ WEBHOOK_TIMEOUT), which the lease (twice the timeout and a second)
 * covers.
 */
const MAX_HELD = 2 * MAX_IN_FLIGHT;
/**
 * A lane's claims, and its outcome writes, are at least this far apart: a
 * steady flow of events is claimed and written in batches, not one
 * statement per event, for at most this much more latency.
 */
const STATEMENT_GAP_MS = 10;
/** After a database error, a lane tries again this much later. */
const AFTER_ERROR_MS = 1000;
/** Due messages that another instance was claiming at the same moment: looked at again this much later. */
const SKIPPED_WAIT_MS = 25;
const USER_AGENT = 'hds-webhooks/1';

interface Waiting {
  endpoint: ClaimedEndpoint;
  message: ClaimedMessage;
  claimedAt: number;
}

/**
 * One endpoint's deliveries in this instance: claims what is due
 * (claims.ts) while fewer than MAX_IN_FLIGHT claimed messages wait, sends
 * them (at most MAX_IN_FLIGHT at once), writes the outcomes in batches;
 * with nothing due it sleeps until its earliest message is due, or its
 * rate_limit's next second.
 */
export class Lane {
  private readonly waiting: Waiting[] = [];
  private inFlight = 0;
  private pumping = false;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private outcomes: Outcome[] = [];
  /** Outcomes in the statement being written (0: none is). */
  private writing = 0;
  private lastClaimAt = 0;
  private lastFlushAt = 0;
  private flushTimer: NodeJS.Timeout | undefined;
  private idle: (() => void)[] = [];

  constructor(private readonly endpointId: string, private readonly dispatcher: Dispatcher, private readonly sender: Sender) {}

  wake(): void {
    if (!this.dispatcher.running) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    void this.pump();
  }

  /** Wakes the lane in `ms`, unless it is to wake earlier already. */
  wakeIn(ms: number): void {
    const at = Date.now() + ms;
    if (this.timer && this.timerAt <= at) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Infinity;
      this.wake();
    }, ms);
    this.timer.unref();
  }

  halt(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private get held(): number {
    return this.waiting.length + this.inFlight + this.outcomes.length + this.writing;
  }

  /** Resolves once nothing is waiting, in flight or being written. */
  drained(): Promise<void> {
    if (this.held === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  private async pump(): Promise<void> {
    this.pumping = true;
    const { sql, leaseMs, options } = this.dispatcher;
    try {
      do {
        this.again = false;
        const room = MAX_HELD - this.held;
        // Enough claimed already: attempts that end wake the lane.
        if (room <= 0 || this.waiting.length >= MAX_IN_FLIGHT) break;
        const gap = this.lastClaimAt + STATEMENT_GAP_MS - Date.now();
        if (gap > 0) {
          this.wakeIn(gap);
          break;
        }
        this.lastClaimAt = Date.now();
        const claim = await claimMessages(sql, this.endpointId, room, leaseMs);
        if (!claim) {
          if (this.held === 0) this.dispatcher.dropLane(this.endpointId);
          break;
        }
        const claimedAt = Date.now();
        for (const message of claim.messages) this.waiting.push({ endpoint: claim.endpoint, message, claimedAt });
        this.send();
        if (claim.rateLimitedForMs !== null) this.wakeIn(claim.rateLimitedForMs);
        else if (claim.messages.length === room) this.again = true;
        else if (claim.messages.length === 0 && claim.nextDueMs !== null) this.wakeIn(Math.max(claim.nextDueMs, SKIPPED_WAIT_MS));
      } while (this.again && this.dispatcher.running);
    } catch (err) {
      options.log.warn({ endpoint_id: this.endpointId, err: { code: errorCode(err), message: (err as Error).message } }, 'could not claim webhook messages');
      this.wakeIn(AFTER_ERROR_MS);
    } finally {
      this.pumping = false;
    }
  }

  /**
   * Starts attempts for waiting messages while there is room. One that
   * waited past the timeout is not sent: its lease could end before its
   * outcome is written, and it is claimed again then.
   */
  private send(): void {
    while (this.inFlight < MAX_IN_FLIGHT && this.waiting.length > 0 && !this.dispatcher.abandoned) {
      const next = this.waiting.shift()!;
      if (Date.now() - next.claimedAt > this.dispatcher.options.timeoutMs) continue;
      this.attempt(next.endpoint, next.message);
    }
    if (this.dispatcher.abandoned) this.waiting.length = 0;
    this.settled();
  }

  private attempt(endpoint: ClaimedEndpoint, message: ClaimedMessage): void {
    const { options } = this.dispatcher;
    this.inFlight++;
    const id = messageId(message.event_id);
    const timestamp = Math.floor(Date.now() / 1000);
    const signature = signatures(endpoint.secrets, id, timestamp, message.body);
    const at = new Date().toISOString();
    const headers = {
      ...endpoint.headers,
      'content-type': 'application/json', 'user-agent': USER_AGENT,
      'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signature,
      'svix-id': id, 'svix-timestamp': String(timestamp), 'svix-signature': signature,
    };
    void this.sender.send(endpoint.url, headers, message.body).then((result) => {
      this.inFlight--;
      if (this.dispatcher.abandoned) return this.send();
      const delivered = result.status !== null && result.status >= 200 && result.status < 300;
      const retryInMs = delivered || result.status === 410 ? null : (options.retryScheduleMs[message.attempts - 1] ?? null);
      if (!delivered) {
        // The endpoint's id and what happened: never its URL, a header value or a secret.
        options.log.warn({
          endpoint_id: this.endpointId, webhook_id: id, attempt: message.attempts, status: result.status,
          ...(result.error ? { error: result.error } : {}), retry_in_ms: retryInMs,
        }, 'webhook attempt failed');
      }
      this.outcomes.push({ event_id: message.event_id, attempts: message.attempts, status: result.status, delivered, retryInMs, at });
      this.flush();
      this.send();
      this.wake();
    });
  }

  /** Writes the outcomes gathered, one statement at a time; their room is free again once they are written. */
  private flush(): void {
    if (this.writing > 0 || this.flushTimer || this.outcomes.length === 0) return;
    const gap = this.lastFlushAt + STATEMENT_GAP_MS - Date.now();
    if (gap > 0) {
      this.flushTimer = setTimeout(() => {
        this.flushTimer = undefined;
        this.flush();
      }, gap);
      return;
    }
    this.lastFlushAt = Date.now();
    const batch = this.outcomes.splice(0);
    this.writing = batch.length;
    const { sql, options, stats } = this.dispatcher;
    recordOutcomes(sql, this.endpointId, batch, options.disableAfterMs).then((change) => {
      for (const o of batch) {
        if (o.delivered) stats.delivered++;
        else if (o.retryInMs === null) stats.exhausted++;
        else stats.retried++;
      }
      if (change.disabled) {
        stats.endpointsDisabled++;
        options.log.warn({ endpoint_id: this.endpointId, reason: change.disabled === 'gone' ? 'answered 410 Gone' : 'every attempt failed for WEBHOOK_DISABLE_AFTER' },
          'webhook endpoint disabled');
      }
    }, (err) => {
      // Not written: the claims' leases end, and the attempts are made again (same webhook-id).
      options.log.warn({ endpoint_id: this.endpointId, err: { code: errorCode(err), message: (err as Error).message } }, 'could not record webhook attempts');
    }).finally(() => {
      this.writing = 0;
      this.flush();
      this.settled();
      this.wake();
    });
  }

  /** Resolves drained() once the lane holds nothing. */
  private settled(): void {
    if (this.held === 0) for (const resolve of this.idle.splice(0)) resolve();
  }
}
