/**
 * Reads an imported dataset back through the HTTP API: for every team, walks
 * all list pages with a key of that team, and fetches every user by id, and
 * checks that each user of the file comes back exactly once, equal to its
 * line (date-times compared as instants, sources in contract order).
 *
 *   npx tsx bench/readback.ts --file users.jsonl --base http://127.0.0.1:8000 --keys keys.json
 *
 * keys.json maps team_id to an API key of that team.
 */
import fs from 'node:fs';
import readline from 'node:readline';
import { parseArgs } from 'node:util';
import { asApiUser, canonicalTimes } from '../test/helpers.js';

const { values } = parseArgs({ options: { file: { type: 'string' }, base: { type: 'string' }, keys: { type: 'string' }, concurrency: { type: 'string', default: '32' } } });
if (!values.file || !values.base || !values.keys) throw new Error('usage: --file FILE --base URL --keys KEYS.json');
const keys = JSON.parse(fs.readFileSync(values.keys, 'utf8')) as Record<string, string>;
const base = values.base;

// The expected users, as canonical JSON text per user id (about 1 KB each: fine for a million).
const expected = new Map<string, { team: string; json: string }>();
const usersPerTeam = new Map<string, number>();
for await (const line of readline.createInterface({ input: fs.createReadStream(values.file) })) {
  if (!line) continue;
  const user = JSON.parse(line);
  expected.set(user.user_id, { team: user.team_id, json: JSON.stringify(canonicalTimes(asApiUser(user))) });
  usersPerTeam.set(user.team_id, (usersPerTeam.get(user.team_id) ?? 0) + 1);
}
console.log(`readback: ${expected.size} users expected`);

let problems = 0;
const problem = (msg: string) => { if (++problems <= 20) console.log(`readback: ${msg}`); };
const get = async (path: string, team: string) => {
  const res = await fetch(base + path, { headers: { 'x-service-api-key': keys[team]! } });
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res.json() as Promise<any>;
};

// 1. Every team's list, page by page.
const seen = new Set<string>();
for (const [team, count] of usersPerTeam) {
  let total = 0;
  for (let offset = 0; ; offset += 500) {
    const page = await get(`/v2/user/?limit=500&offset=${offset}`, team);
    total = page.total;
    for (const user of page.users) {
      const want = expected.get(user.user_id);
      if (!want || want.team !== team) problem(`list of ${team} shows ${user.user_id}, not one of its users in the file`);
      else if (JSON.stringify(canonicalTimes(user)) !== want.json) problem(`list: ${user.user_id} differs from its line`);
      if (seen.has(user.user_id)) problem(`list: ${user.user_id} twice`);
      seen.add(user.user_id);
    }
    if (page.users.length < 500) break;
  }
  if (total !== count) problem(`team ${team}: total ${total}, file has ${count}`);
}
console.log(`readback: lists returned ${seen.size} users`);
for (const id of expected.keys()) if (!seen.has(id)) problem(`list never showed ${id}`);

// 2. Every user by id, with its own team's key.
const ids = [...expected.keys()];
let next = 0;
let fetched = 0;
const started = Date.now();
await Promise.all(Array.from({ length: Number(values.concurrency) }, async () => {
  while (next < ids.length) {
    const id = ids[next++]!;
    const want = expected.get(id)!;
    try {
      const user = await get(`/v2/user/${id}`, want.team);
      if (JSON.stringify(canonicalTimes(user)) !== want.json) problem(`get: ${id} differs from its line`);
      fetched++;
    } catch (err) {
      problem(`get: ${(err as Error).message}`);
    }
  }
}));
console.log(`readback: fetched ${fetched} users by id in ${((Date.now() - started) / 1000).toFixed(0)} s`);
console.log(problems === 0 ? 'readback: every user of the file is readable, equal to its line' : `readback: ${problems} problems`);
process.exit(problems === 0 ? 0 : 1);
