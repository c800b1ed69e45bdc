import type { Tx } from './client.js';

/**
 * Rebuilding a table under a shadow copy, for bulk loads: rows go into a new
 * table with no index (PostgreSQL then writes each row once and keeps no
 * index up to date row by row), the indexes are built afterwards by sorting,
 * and the new table takes the old one's place in one short exclusive lock at
 * the end: index upkeep row by row was half of a COPY into an indexed table.
 * Decision: docs/decisions/bulk-import-binary-copy.md
 *
 * Readers keep reading the old table until the commit; a statement that
 * arrives during the swap waits for it and then reads the new table (PostgreSQL
 * resolves the name again once the lock is granted, and takes the statement's
 * snapshot after that). A REPEATABLE READ transaction that began before the
 * commit would see the new table as empty: nothing of ours uses one.
 */
export interface RebuildPlan {
  table: string;
  shadow: string;
  /** Index definitions of `table`, each with the name it must get back after the swap. */
  indexes: { name: string; shadowName: string; definition: string; constraint: { name: string; type: 'PRIMARY KEY' | 'UNIQUE' } | null }[];
}

/**
 * How `table` (a plain, unquoted name of ours) can be rebuilt, or why it
 * cannot: only a table whose whole definition is copied by `CREATE TABLE
 * ... (LIKE ...)` and its index definitions qualifies; anything else
 * attached to it (views, triggers, policies, grants, another owner, storage
 * parameters, foreign keys, publications, inheritance, sequences) would be
 * lost or would block the swap.
 */
export async function planRebuild(tx: Tx, table: string): Promise<RebuildPlan | { impossible: string }> {
  const [rel] = await tx<{ oid: number; qualified: string; kind: string; rls: boolean; acl: boolean; owned: boolean; options: boolean; inherits: boolean }[]>`
    SELECT c.oid, format('%I.%I', n.nspname, c.relname) AS qualified, c.relkind AS kind, c.relrowsecurity AS rls,
           c.relacl IS NOT NULL AS acl, c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user) AS owned,
           c.reloptions IS NOT NULL AS options,
           EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid OR i.inhparent = c.oid) AS inherits
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = to_regclass(${table})`;
  if (!rel) return { impossible: `${table} does not exist` };
  if (rel.kind !== 'r' || rel.inherits) return { impossible: `${table} is partitioned or inherited` };
  if (rel.rls) return { impossible: `${table} has row-level security` };
  if (rel.acl) return { impossible: `${table} has grants of its own` };
  if (!rel.owned) return { impossible: `${table} is owned by another role` };
  if (rel.options) return { impossible: `${table} has storage parameters` };
  const [attached] = await tx<{ what: string }[]>`
    SELECT 'a view or rule' AS what FROM pg_depend d JOIN pg_rewrite r ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
      WHERE d.refobjid = ${rel.oid} AND r.ev_class <> ${rel.oid}
    UNION ALL SELECT 'a trigger' FROM pg_trigger WHERE tgrelid = ${rel.oid} AND NOT tgisinternal
    UNION ALL SELECT 'a foreign key' FROM pg_constraint WHERE contype = 'f' AND (conrelid = ${rel.oid} OR confrelid = ${rel.oid})
    UNION ALL SELECT 'a publication' FROM pg_publication_rel WHERE prrelid = ${rel.oid}
    -- LIKE would give the shadow a sequence of its own, starting again at 1.
    UNION ALL SELECT 'an identity or serial column' FROM pg_attribute a
      LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
      WHERE a.attrelid = ${rel.oid} AND a.attnum > 0 AND NOT a.attisdropped
        AND (a.attidentity <> '' OR pg_get_expr(ad.adbin, ad.adrelid) LIKE 'nextval(%')
    LIMIT 1`;
  if (attached) return { impossible: `${table} has ${attached.what} attached` };

  const shadow = `${table}_bulk`;
  const rows = await tx<{ name: string; definition: string; constraint_name: string | null; constraint_type: string | null }[]>`
    SELECT quote_ident(ic.relname) AS name, pg_get_indexdef(i.indexrelid) AS definition,
           quote_ident(con.conname) AS constraint_name, con.contype AS constraint_type
    FROM pg_index i
    JOIN pg_class ic ON ic.oid = i.indexrelid
    LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid
    WHERE i.indrelid = ${rel.oid}
    ORDER BY ic.relname`;
  const indexes: RebuildPlan['indexes'] = [];
  for (const [n, row] of rows.entries()) {
    const m = /^CREATE (UNIQUE )?INDEX (\S+) ON (?:ONLY )?(\S+) (USING .*)$/.exec(row.definition);
    if (!m || m[3] !== rel.qualified) return { impossible: `index ${row.name} has a definition this rebuild does not understand` };
    if (row.constraint_type !== null && row.constraint_type !== 'p' && row.constraint_type !== 'u') {
      return { impossible: `index ${row.name} belongs to a constraint of type ${row.constraint_type}` };
    }
    const shadowName = `${shadow}_index_${n}`;
    indexes.push({
      name: row.name,
      shadowName,
      definition: `CREATE ${m[1] ?? ''}INDEX ${shadowName} ON ${shadow} ${m[4]}`,
      constraint: row.constraint_name === null ? null
        : { name: row.constraint_name, type: row.constraint_type === 'p' ? 'PRIMARY KEY' : 'UNIQUE' },
    });
  }
  return { table, shadow, indexes };
}

/** The empty shadow: every column, default, NOT NULL and CHECK of the table, and no index. */
export async function createShadow(tx: Tx, plan: RebuildPlan): Promise<void> {
  await tx.unsafe(`CREATE TABLE ${plan.shadow} (LIKE ${plan.table} INCLUDING ALL EXCLUDING INDEXES)`);
}

/** Builds the table's indexes on the shadow (each by one sort; PostgreSQL may use parallel workers). */
export async function buildShadowIndexes(tx: Tx, plan: RebuildPlan): Promise<void> {
  for (const index of plan.indexes) await tx.unsafe(index.definition);
}

/**
 * Puts the shadow in the table's place under its name, with its indexes and
 * constraints under theirs. Holds an exclusive lock on the table until the
 * transaction ends: keep what follows short.
 */
export async function swapInShadow(tx: Tx, plan: RebuildPlan): Promise<void> {
  await tx.unsafe(`LOCK TABLE ${plan.table}, ${plan.shadow} IN ACCESS EXCLUSIVE MODE`);
  await tx.unsafe(`DROP TABLE ${plan.table}`);
  await tx.unsafe(`ALTER TABLE ${plan.shadow} RENAME TO ${plan.table}`);
  for (const index of plan.indexes) {
    // A PRIMARY KEY or UNIQUE constraint takes over the index and gives it the constraint's name.
    if (index.constraint) await tx.unsafe(`ALTER TABLE ${plan.table} ADD CONSTRAINT ${index.constraint.name} ${index.constraint.type} USING INDEX ${index.shadowName}`);
    else await tx.unsafe(`ALTER INDEX ${index.shadowName} RENAME TO ${index.name}`);
  }
}
