import { Worker } from 'node:worker_threads';
import type { Config } from '../config.js';
import { SharedDeliveryStats } from './dispatcher.js';

/**
 * Webhook delivery on a worker thread of its own (./delivery-worker.ts), so
 * that sending and claiming do not take turns with the requests on the API's
 * event loop (decision: docs/decisions/webhook-delivery-in-postgresql.md, "On
 * its own thread"). The thread has its own pool; its counts are in shared
 * memory (SharedDeliveryStats), read here by /metrics; its log lines come
 * here and are written with the process's own.
 */

/** The thread's pool; its LISTEN connection is one more (postgres.js opens it apart). */
export const DELIVERY_POOL_MAX = 4;
/** A thread that died is started again this much later (a thread that cannot start is retried, and logged, at this pace). */
const RESTART_DELAY_MS = 1000;
/**
 * What stop() gives the thread past its drain before terminating it: the
 * dispatcher's own bounded waits (its UNLISTEN, the attempts cut at the
 * drain's end: a second each) and the end of its pool (a second).
 */
const STOP_MARGIN_MS = 3000;

/** What the thread is started with (workerData). */
export interface DeliveryWorkerData {
  url: string;
  applicationName: string;
  poolMax: number;
  statementTimeoutMs: number;
  connectTimeoutS: number;
  timeoutMs: number;
  retryScheduleMs: number[];
  disableAfterMs: number;
  allowPrivate: boolean;
  logLevel: string;
  stats: SharedArrayBuffer;
}

export type FromDeliveryWorker = { log: string } | { started: true } | { stopped: true };
export interface ToDeliveryWorker { stop: number }

export interface DeliveryThreadOptions {
  /** The primary's URL as this process opened it (the embedded server's, known only once it runs). */
  url: string;
  config: Config;
  /** The sessions' application_name: the process's own, so that hds_db_connections counts the thread's too. */
  applicationName: string;
  /** Writes one of the thread's log lines (JSON, at LOG_LEVEL) where the process's own go. */
  writeLog(line: string): void;
  /** Where the thread's death and restart are told. */
  log: { error(fields: object, msg: string): void; warn(fields: object, msg: string): void };
}

export class DeliveryThread {
  /** Attempts by outcome and endpoints disabled since the process started, across restarts of the thread. */
  readonly stats = new SharedDeliveryStats();
  private worker: Worker | undefined;
  private stopping = false;
  private restartTimer: NodeJS.Timeout | undefined;

  private constructor(private readonly options: DeliveryThreadOptions) {}

  /** Resolves once the thread's dispatcher listens; rejects when the thread ends before (the server does not start then). */
  static async start(options: DeliveryThreadOptions): Promise<DeliveryThread> {
    const thread = new DeliveryThread(options);
    await thread.spawn();
    return thread;
  }

  private spawn(): Promise<void> {
    const { config } = this.options;
    const worker = startWorker({
      url: this.options.url, applicationName: this.options.applicationName, poolMax: DELIVERY_POOL_MAX,
      statementTimeoutMs: config.dbStatementTimeoutMs, connectTimeoutS: config.dbConnectTimeoutS,
      timeoutMs: config.webhookTimeoutMs, retryScheduleMs: config.webhookRetryScheduleMs,
      disableAfterMs: config.webhookDisableAfterMs, allowPrivate: config.webhookAllowPrivate,
      logLevel: config.logLevel, stats: this.stats.buffer,
    });
    // Delivery alone never keeps the process up: the server's listener does.
    worker.unref();
    this.worker = worker;
    return new Promise((resolve, reject) => {
      let started = false;
      let failure: Error | undefined;
      worker.on('message', (m: FromDeliveryWorker) => {
        if ('log' in m) this.options.writeLog(m.log);
        else if ('started' in m) {
          started = true;
          resolve();
        }
      });
      worker.on('error', (err) => { failure = err; });
      worker.on('exit', (code) => {
        if (this.worker === worker) this.worker = undefined;
        if (this.stopping) return resolve();
        if (!started) return reject(failure ?? new Error(`the webhook delivery thread exited (code ${code}) before it started`));
        // Never run on without delivery: told, and started again. Its attempts cut short are made again once their leases end.
        this.options.log.error({ err: failure, exit_code: code }, `webhook delivery thread died: starting it again in ${RESTART_DELAY_MS} ms`);
        this.restartLater();
      });
    });
  }

  private restartLater(): void {
    this.restartTimer = setTimeout(() => {
      if (this.stopping) return;
      this.spawn().catch((err: Error) => {
        if (this.stopping) return;
        this.options.log.error({ err }, `webhook delivery thread could not start: trying again in ${RESTART_DELAY_MS} ms`);
        this.restartLater();
      });
    }, RESTART_DELAY_MS);
    this.restartTimer.unref();
  }

  /**
   * Stops claiming at once, lets the attempts in flight finish for up to
   * `drainMs` (./dispatcher.ts, stop()) and closes the thread's pool; a
   * thread that has not ended STOP_MARGIN_MS later is terminated.
   */
  async stop(drainMs: number): Promise<void> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    const worker = this.worker;
    if (!worker) return;
    const ended = new Promise<'ended'>((resolve) => {
      worker.once('exit', () => resolve('ended'));
      worker.on('message', (m: FromDeliveryWorker) => { if ('stopped' in m) resolve('ended'); });
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => { timer = setTimeout(() => resolve('late'), drainMs + STOP_MARGIN_MS); });
    worker.postMessage({ stop: drainMs } satisfies ToDeliveryWorker);
    if (await Promise.race([ended, late]) === 'late') {
      this.options.log.warn({ drain_ms: drainMs }, 'webhook delivery thread did not stop in time: terminating it');
    }
    clearTimeout(timer);
    // Its pool is closed once it said so: nothing is left to cut.
    await worker.terminate();
  }
}

function startWorker(workerData: DeliveryWorkerData): Worker {
  if (!import.meta.url.endsWith('.ts')) return new Worker(new URL('./delivery-worker.js', import.meta.url), { workerData });
  // Run from source under tsx (tests, npm run dev): a worker thread does not inherit tsx's loader, so it
  // registers it before loading the worker module, as src/import/reader.ts does for the import's workers.
  const entry = new URL('./delivery-worker.ts', import.meta.url).href;
  const tsx = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(tsx)}).then((m) => m.register()).then(() => import(${JSON.stringify(entry)}))`;
  return new Worker(code, { eval: true, workerData });
}
