import type { Sql } from '../db/client.js';

/** The deployment's organisation (migrations/009): one row, made with the database. */
export interface Org {
  id: string;
  name: string;
  created_on: string;
}

export async function findOrg(sql: Sql): Promise<Org> {
  const [row] = await sql<Org[]>`SELECT org_id AS id, name, to_json(created_at) #>> '{}' AS created_on FROM org`;
  if (!row) throw new Error('the org table has no row: migrations/009_management.sql makes it');
  return row;
}

/** The secret that signs list cursors (src/management/cursor.ts); the same for every instance. */
export async function cursorSecret(sql: Sql): Promise<Buffer> {
  const [row] = await sql<{ cursor_secret: Buffer }[]>`SELECT cursor_secret FROM org`;
  if (!row) throw new Error('the org table has no row: migrations/009_management.sql makes it');
  return row.cursor_secret;
}
