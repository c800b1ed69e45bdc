import { performance } from 'node:perf_hooks';

/** How often the clock looks at the event loop. */
const TICK_MS = 50;
/** A tick this late means the loop could not run: a long synchronous task, or a machine that starved the process. */
const STALL_AFTER_MS = 2 * TICK_MS;

/**
 * How long this process's event loop has been unable to run. A deadline
 * that waits for another party's answer (the freeze guard's probe, a Redis
 * command) must not count that time: an answer that arrived meanwhile sits
 * unread in the socket, and the other party was not silent. One tick every
 * 50 ms for the whole process, started on first use and never keeping it
 * alive, counts every gap longer than two ticks.
 */
let lastTick = 0;
let stalled = 0;
let ticking: NodeJS.Timeout | undefined;

function openStall(): number {
  const gap = performance.now() - lastTick;
  return gap > STALL_AFTER_MS ? gap - TICK_MS : 0;
}

/** Milliseconds the loop has been stalled so far, a stall still under way (read after it) included. Compare two readings. */
export function stalledMs(): number {
  if (!ticking) {
    lastTick = performance.now();
    ticking = setInterval(() => {
      stalled += openStall();
      lastTick = performance.now();
    }, TICK_MS);
    ticking.unref();
  }
  return stalled + openStall();
}

/**
 * `answer`, or a rejection with `timedOut()` once it has gone unanswered for
 * `ms` of time in which this process could have read it (the clock's stalls
 * not counted). When the time is up, one more turn of the loop is given to
 * answers already in the socket before the rejection.
 */
export function withinLoopTime<T>(answer: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  return new Promise((resolve, reject) => {
    const startedAt = performance.now();
    const stalledAtStart = stalledMs();
    let settled = false;
    let timer: NodeJS.Timeout;
    const wait = (left: number) => { timer = setTimeout(() => setImmediate(check), left); };
    const check = () => {
      if (settled) return;
      const waited = performance.now() - startedAt - (stalledMs() - stalledAtStart);
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
