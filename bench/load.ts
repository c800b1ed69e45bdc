import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { LoadResult, LoadSpec } from './load-plan.js';
import { runToEnd } from './processes.js';

let runs = 0;

/** Runs autocannon in a child process (bench/load-child.ts) and returns its summary. */
export async function runLoad(root: string, workDir: string, spec: LoadSpec): Promise<LoadResult> {
  const specFile = path.join(workDir, `load-spec-${process.pid}-${++runs}.json`);
  fs.writeFileSync(specFile, JSON.stringify(spec));
  const loadAvg1AtStart = os.loadavg()[0];
  try {
    const { stdout } = await runToEnd('autocannon', process.execPath, ['--import', 'tsx', path.join(root, 'bench/load-child.ts'), specFile]);
    const last = stdout.trim().split('\n').pop() ?? '';
    return { ...(JSON.parse(last) as LoadResult), loadAvg1AtStart };
  } finally {
    fs.rmSync(specFile, { force: true });
  }
}
