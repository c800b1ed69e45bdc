/**
 * One run of PostgreSQL's own statement (bench/anchor.ts, on the driver) in
 * a process of its own, for a harness whose process is busy with other work
 * while it measures: bench/webhooks.ts receives the deliveries and paces the
 * creates, and an anchor's loop beside them would be slowed by that work
 * where the service's load generator (wrk, its own process) is not.
 *
 *   node --import tsx bench/anchor-child.ts SPEC.json   (prints one JSON LoadResult line)
 */
import fs from 'node:fs';
import { startAnchor, type LookupAnchor, type PageAnchor } from './anchor.js';

export interface AnchorChildSpec {
  root: string;
  workDir: string;
  url: string;
  statement: PageAnchor | LookupAnchor;
  connections: number;
  seconds: number;
}

const spec = JSON.parse(fs.readFileSync(process.argv[2]!, 'utf8')) as AnchorChildSpec;
const anchor = await startAnchor(spec.root, spec.workDir, spec.url, spec.statement.teamId, 'driver');
try {
  process.stdout.write(`${JSON.stringify(await anchor.run(spec.statement, spec.connections, spec.seconds))}\n`);
} finally {
  await anchor.close();
}
