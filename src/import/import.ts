import type { Sql } from '../db/client.js';
import { encodedBatches, type ImportInput } from './reader.js';
import { ImportSpool } from './spool.js';
import { bulkImport } from './bulk.js';
import { prepareImport, type ImportSummary } from './context.js';
import { mergeImport } from './merge.js';

export { ImportError } from './line.js';
export type { ImportSummary } from './context.js';

/**
 * What an import is doing: `checking` the input's lines (and spooling them),
 * `writing` the users into PostgreSQL, `indexing` (the bulk load builds the
 * new tables' indexes), `merging` (the merge's set-wise statements), then
 * `finishing` (the teams' state, statistics, the swap and the commit).
 */
export type ImportStep = 'checking' | 'writing' | 'indexing' | 'merging' | 'finishing';

export interface ImportProgress {
  step: ImportStep;
  /** Lines checked so far (every line, once `checking` is over). */
  lines: number;
  /** Input bytes read so far. */
  bytes: number;
  /** Users written into PostgreSQL so far, of `lines` (during `writing`). */
  written: number;
}

/**
 * How the rows are written: `bulk` builds new users and user_sources tables
 * and swaps them in (for loads that at least double the table), `merge`
 * inserts and updates row by row. `auto` picks bulk when it applies.
 */
export type ImportMethod = 'auto' | 'bulk' | 'merge';

export const isImportMethod = (value: string): value is ImportMethod => value === 'auto' || value === 'bulk' || value === 'merge';

// pg_advisory_xact_lock key: imports run one at a time (creates do not wait for it).
export const IMPORT_LOCK = 0x4844_5349; // "HDSI"

/**
 * Imports users in one transaction, all or nothing. `input` is lines, or
 * the raw bytes of JSON Lines (src/import/reader.ts). Every line is
 * checked and spooled first (src/import/spool.ts): a bad line aborts
 * the import with its line number before anything is written. Then the users
 * are written either in bulk or by merging (see ImportMethod). Importing the
 * same data again changes no row.
 */
export async function importUsers(
  sql: Sql,
  input: ImportInput,
  onProgress?: (p: ImportProgress) => void,
  options: { method?: ImportMethod } = {},
): Promise<ImportSummary> {
  const spool = ImportSpool.create();
  try {
    const progress: ImportProgress = { step: 'checking', lines: 0, bytes: 0, written: 0 };
    const report = (step: ImportStep, written = progress.written) => {
      progress.step = step;
      progress.written = written;
      onProgress?.(progress);
    };
    for await (const batch of encodedBatches(input, spool.dir)) {
      spool.addBatch(batch);
      progress.lines += batch.users;
      progress.bytes += batch.size;
      onProgress?.(progress);
    }
    if (spool.users === 0) return { lines: 0, teams: 0, inserted: 0, updated: 0, sourceLinksChanged: 0, method: 'merge' };

    return await sql.begin(async (tx) => {
      // A bulk load is not a request: no request-sized statement timeout, more memory for sorts and index builds.
      await tx`SET LOCAL statement_timeout = 0`;
      await tx`SET LOCAL work_mem = '256MB'`;
      await tx`SET LOCAL maintenance_work_mem = '512MB'`;
      await tx`SELECT pg_advisory_xact_lock(${IMPORT_LOCK})`;
      const context = { ...await prepareImport(tx, spool), progress: report };
      let bulkSkipped: string | undefined;
      if (options.method !== 'merge') {
        const bulk = await bulkImport(tx, context, { onlyWhenWorthIt: options.method !== 'bulk' });
        if ('method' in bulk) {
          report('finishing');
          return bulk;
        }
        bulkSkipped = bulk.impossible;
      }
      const merged = await mergeImport(tx, context);
      report('finishing');
      return { ...merged, ...(bulkSkipped !== undefined && { bulkSkipped }) };
    });
  } finally {
    spool.close();
  }
}
