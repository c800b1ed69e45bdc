import fs from 'node:fs';
import path from 'node:path';
import type { CapturedResponse } from './capture.js';
import { startProcess, stopProcess, type Child } from './processes.js';
import { freePort } from '../src/free-port.js';
import { waitForHttp } from './service.js';

export interface Floor {
  child: Child;
  baseUrl: string;
  /** Makes the floor answer as the service did for this scenario. */
  select(scenarioId: string): Promise<void>;
  stop(): Promise<void>;
}

/** Starts bench/floor-server.ts in its own process, loaded with the captured answers. */
export async function startFloor(root: string, workDir: string, captured: Record<string, CapturedResponse[]>): Promise<Floor> {
  const file = path.join(workDir, `floor-responses-${process.pid}.json`);
  fs.writeFileSync(file, JSON.stringify(captured));
  const port = await freePort();
  const child = startProcess('floor', process.execPath, ['--import', 'tsx', path.join(root, 'bench/floor-server.ts'), file], {
    env: { ...process.env, PORT: String(port) },
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${baseUrl}/`, child, Date.now(), 30_000);
  } catch (err) {
    await stopProcess(child);
    throw err;
  } finally {
    fs.rmSync(file, { force: true });
  }
  return {
    child,
    baseUrl,
    async select(id) {
      const res = await fetch(`${baseUrl}/__floor/${id}`, { method: 'PUT' });
      if (res.status !== 204) throw new Error(`floor has no scenario ${id}`);
    },
    stop: () => stopProcess(child),
  };
}
