import { randomInt } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { startProcess } from './processes.js';

export interface Dataset {
  file: string;
  users: number;
  /** Users per team, biggest first. */
  teams: { teamId: string; users: number }[];
  biggest: { teamId: string; users: number };
  smallest: { teamId: string; users: number };
  /** One user_id per line: every user of the biggest team, for "get one user". */
  biggestIdsFile: string;
}

interface Meta {
  users: number;
  teams: { teamId: string; users: number }[];
}

/**
 * The generator writes `{"user_id":"<uuid>","team_id":"<uuid>",...` at the
 * start of every line; reading both ids from fixed positions keeps the scan of
 * a million lines to a few seconds. Anything else falls back to JSON.parse.
 */
function ids(line: string): { userId: string; teamId: string } {
  if (line.startsWith('{"user_id":"') && line.startsWith('","team_id":"', 48)) {
    return { userId: line.slice(12, 48), teamId: line.slice(61, 97) };
  }
  const doc = JSON.parse(line) as { user_id: string; team_id: string };
  return { userId: doc.user_id, teamId: doc.team_id };
}

async function generate(root: string, file: string, users: number, teams: number, seed: number): Promise<void> {
  const partial = `${file}.partial`;
  const out = fs.openSync(partial, 'w');
  const gen = startProcess('gen-users', process.execPath, [path.join(root, 'tools/gen-users.mjs'), '--users', String(users), '--teams', String(teams), '--seed', String(seed)], { stdio: ['ignore', out, 'inherit'] });
  fs.closeSync(out);
  const code = await gen.exited;
  if (code !== 0) throw new Error(`tools/gen-users.mjs failed (exit ${code})`);
  fs.renameSync(partial, file);
}

async function scan(file: string, idsFile: string): Promise<Meta> {
  const counts = new Map<string, number>();
  const lines = readline.createInterface({ input: fs.createReadStream(file), crlfDelay: Infinity });
  let users = 0;
  let firstTeam: string | undefined;
  // The ids go to the file as they are read: a slice keeps its whole line alive, and holding the
  // biggest team's 5.2 million of them (ten million users) ran the bench out of heap.
  const out = fs.openSync(idsFile, 'w');
  let pending = '';
  try {
    for await (const line of lines) {
      if (line === '') continue;
      const { userId, teamId } = ids(line);
      users++;
      counts.set(teamId, (counts.get(teamId) ?? 0) + 1);
      firstTeam ??= teamId;
      if (teamId !== firstTeam) continue;
      pending += `${userId}\n`;
      if (pending.length >= 1 << 20) {
        fs.writeSync(out, pending);
        pending = '';
      }
    }
    fs.writeSync(out, pending);
  } finally {
    fs.closeSync(out);
  }
  const teams = [...counts].map(([teamId, n]) => ({ teamId, users: n })).sort((a, b) => b.users - a.users);
  // The generator puts about half of all users in the first team it draws; check rather than assume.
  if (teams[0]?.teamId !== firstTeam) throw new Error('the biggest team is not the first one in the dataset; the generator changed?');
  return { users, teams };
}

/** Generates (or finds from an earlier run) the dataset for these arguments; same arguments give the same bytes. */
export async function prepareDataset(root: string, workDir: string, users: number, teams: number, seed: number, say: (msg: string) => void): Promise<Dataset> {
  const dir = path.join(workDir, 'datasets', `u${users}_t${teams}_s${seed}`);
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'users.jsonl');
  const metaFile = path.join(dir, 'meta.json');
  const biggestIdsFile = path.join(dir, 'biggest-team-user-ids.txt');
  if (!fs.existsSync(file)) {
    say(`generating ${users.toLocaleString('en')} users in ${teams} teams into ${path.relative(root, file)}`);
    const started = Date.now();
    await generate(root, file, users, teams, seed);
    say(`generated in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    fs.rmSync(metaFile, { force: true });
  } else {
    say(`reusing dataset ${path.relative(root, file)}`);
  }
  let meta: Meta;
  if (fs.existsSync(metaFile) && fs.existsSync(biggestIdsFile)) {
    meta = JSON.parse(fs.readFileSync(metaFile, 'utf8')) as Meta;
  } else {
    meta = await scan(file, biggestIdsFile);
    fs.writeFileSync(metaFile, JSON.stringify(meta, null, 2));
  }
  if (meta.users !== users) throw new Error(`dataset ${file} holds ${meta.users} users, expected ${users}; delete ${dir}`);
  return {
    file,
    users: meta.users,
    teams: meta.teams,
    biggest: meta.teams[0]!,
    smallest: meta.teams[meta.teams.length - 1]!,
    biggestIdsFile,
  };
}

/** The ids of an id file (one user_id per line, as biggestIdsFile). */
export function readIds(file: string): string[] {
  const ids = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l !== '');
  if (ids.length === 0) throw new Error(`no ids in ${file}`);
  return ids;
}

/** `n` distinct items of `items` at random (a partial Fisher-Yates shuffle of a copy). */
export function distinctSample<T>(items: T[], n: number): T[] {
  const copy = [...items];
  const count = Math.min(n, copy.length);
  for (let i = 0; i < count; i++) {
    const j = i + randomInt(copy.length - i);
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy.slice(0, count);
}
