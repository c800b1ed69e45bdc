import { performance } from 'node:perf_hooks';

/** How often the clock looks at the event loop. */
const TICK_MS = 50;
/** A tick this late means the loop could not run: a long synchronous task, or a machine that starved the process. */
const STALL_AFTER_MS = 2 * TICK_MS;

/**
 * How long this process's event loop has been unable to run. A deadline
 * that waits for another party's answer (the freeze guard's probe, a Redis
 * command) must not count that time: an answer that arrived meanwhile sits
 * unread in the socket, and the other party was not silent. A tick every
 * 50 ms that finds itself late by more than a tick counts the gap.
 */
export class LoopClock {
  private lastTick = performance.now();
  private stalled = 0;
  private readonly timer: NodeJS.Timeout;

  constructor() {
    this.timer = setInterval(() => {
      this.stalled += this.openStall();
      this.lastTick = performance.now();
    }, TICK_MS);
    this.timer.unref();
  }

  /** Milliseconds the loop has been stalled since this clock started, a stall still under way (read after it) included. */
  stalledMs(): number {
    return this.stalled + this.openStall();
  }

  close(): void {
    clearInterval(this.timer);
  }

  private openStall(): number {
    const gap = performance.now() - this.lastTick;
    return gap > STALL_AFTER_MS ? gap - TICK_MS : 0;
  }
}

/**
 * `answer`, or a rejection with `timedOut()` once it has gone unanswered for
 * `ms` of time in which this process could have read it (the clock's stalls
 * not counted). When the time is up, one more turn of the loop is given to
 * answers already in the socket before the rejection.
 */
export function withinLoopTime<T>(clock: LoopClock, answer: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  return new Promise((resolve, reject) => {
    const startedAt = performance.now();
    const stalledAtStart = clock.stalledMs();
    let settled = false;
    let timer: NodeJS.Timeout;
    const wait = (left: number) => { timer = setTimeout(() => setImmediate(check), left); };
    const check = () => {
      if (settled) return;
      const waited = performance.now() - startedAt - (clock.stalledMs() - stalledAtStart);
      if (waited < ms) return wait(ms - waited);
      settled = true;
      reject(timedOut());
    };
    wait(ms);
    answer.then((value) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(value);
    }, (err: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reject(err);
    });
  });
}
