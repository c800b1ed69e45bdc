import path from 'node:path';
import type { CapturedResponse } from './capture.js';
import { startProcess, stopProcess, type Child } from './processes.js';
import { freePort } from '../src/db/free-port.js';
import { waitForHttp } from './service.js';

export interface Floor {
  child: Child;
  baseUrl: string;
  /** Makes the floor answer as the service did for this scenario (its captured answers replace the previous scenario's). */
  serve(scenarioId: string, answers: CapturedResponse[]): Promise<void>;
  stop(): Promise<void>;
}

/** Starts bench/floor-server.ts in its own process. */
export async function startFloor(root: string): Promise<Floor> {
  const port = await freePort();
  const child = startProcess('floor', process.execPath, ['--import', 'tsx', path.join(root, 'bench/floor-server.ts')], {
    env: { ...process.env, PORT: String(port) },
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${baseUrl}/`, child, Date.now(), 30_000);
  } catch (err) {
    await stopProcess(child);
    throw err;
  }
  return {
    child,
    baseUrl,
    async serve(id, answers) {
      const res = await fetch(`${baseUrl}/__floor/${encodeURIComponent(id)}`, {
        method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(answers),
      });
      if (res.status !== 204) throw new Error(`the floor refused the answers of ${id}: ${res.status} ${await res.text()}`);
    },
    stop: () => stopProcess(child),
  };
}
