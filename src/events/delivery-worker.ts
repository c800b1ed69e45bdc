/**
 * The webhook delivery thread (started by ./delivery-thread.ts): the
 * Dispatcher on a small pool of its own, its counts in the shared memory the
 * main thread reads, its log lines sent to the main thread. On `stop` it
 * drains for up to the time given, closes its pool and says so.
 */
import { parentPort, workerData } from 'node:worker_threads';
import pino from 'pino';
import { connect } from '../db/client.js';
import type { DeliveryWorkerData, FromDeliveryWorker, ToDeliveryWorker } from './delivery-thread.js';
import { Dispatcher, SharedDeliveryStats } from './dispatcher.js';

const data = workerData as DeliveryWorkerData;
const port = parentPort!;
const send = (message: FromDeliveryWorker) => port.postMessage(message);

// The main thread writes the lines into the process's one log stream: two writers on one pipe could interleave.
// What is logged is the dispatcher's: endpoint ids and statuses, never a URL, a secret or a header value.
const log = pino({ level: data.logLevel }, { write: (line: string) => send({ log: line }) });
const sql = connect(data.url, {
  max: data.poolMax, statementTimeoutMs: data.statementTimeoutMs, connectTimeoutS: data.connectTimeoutS, applicationName: data.applicationName,
});
const dispatcher = new Dispatcher(sql, {
  timeoutMs: data.timeoutMs, retryScheduleMs: data.retryScheduleMs, disableAfterMs: data.disableAfterMs,
  allowPrivate: data.allowPrivate, log, stats: new SharedDeliveryStats(data.stats),
});

const starting = dispatcher.start();
port.on('message', ({ stop }: ToDeliveryWorker) => {
  void (async () => {
    await starting.catch(() => {});
    await dispatcher.stop(stop);
    await sql.end({ timeout: 1 });
    send({ stopped: true });
  })();
});
// A failure to start ends the thread with it: the main thread reports it.
await starting;
send({ started: true });
