/**
 * A worker thread of the import's first pass (src/import/reader.ts):
 * encodes the batches it is sent, appends their user records to a spool
 * file of its own, and sends back the rest, buffers transferred.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { RecordFile } from './batch.js';
import { encodeRaw, type RawBatch } from './reader.js';

const { spoolDir, name } = workerData as { spoolDir: string; name: string };
const records = new RecordFile(spoolDir, name);

parentPort!.on('message', ({ id, raw }: { id: number; raw: RawBatch }) => {
  try {
    const b = encodeRaw(raw, records);
    // The batch's byte buffer goes back too, to be filled again (BufferPool in src/import/reader.ts).
    const spare = raw.bytes?.buffer as ArrayBuffer | undefined;
    const buffers = [b.links, b.linkWeeks].map((a) => a.buffer as ArrayBuffer);
    parentPort!.postMessage({ id, batch: b, spare }, [...new Set(spare ? [spare, ...buffers] : buffers)]);
  } catch (err) {
    parentPort!.postMessage({ id, failure: (err as Error).stack ?? String(err) });
  }
});
