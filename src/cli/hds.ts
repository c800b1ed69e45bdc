#!/usr/bin/env node
import fs from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import { issueKey, issueManagementKey } from '../auth/issue-key.js';
import { expireOtherKeys, listKeys, listManagementKeys, revokeKey, revokeManagementKey } from '../auth/key-store.js';
import { findOrg } from '../management/org.js';
import { createTeam, listTeams, teamExists } from '../teams/team-store.js';
import type { ImportProgress } from '../import/import.js';
import { purgeDeletedUsers } from '../users/deletion.js';
import { compactSparseTeams } from '../writes/team-state.js';
import { recountTeams } from '../users/recount.js';
import { isUuid } from '../user-document/rules.js';

import { renderTable } from './table.js';

class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig['options']>;

interface Command {
  usage: string;
  summary: string;
  options: Options;
  positionals: number;
  run(db: Database, values: Record<string, string | boolean | undefined>, positionals: string[], config: Config): Promise<void>;
}

const out = (line: string) => process.stdout.write(line + '\n');

function uuidArg(name: string, value: unknown): string {
  if (typeof value !== 'string' || value === '') throw new UsageError(`${name} is required`);
  if (!isUuid(value)) throw new UsageError(`${name} must be a UUID, got "${value}"`);
  return value.toLowerCase();
}

async function existingTeam(db: Database, value: unknown): Promise<string> {
  const teamId = uuidArg('--team', value);
  if (!(await teamExists(db.sql, teamId))) throw new UsageError(`no team ${teamId}`);
  return teamId;
}

const when = (d: Date | null) => (d ? d.toISOString() : '-');

const COMMANDS: Record<string, Command> = {
  'teams create': {
    usage: 'teams create [--name NAME]', summary: 'create a team; prints its id',
    options: { name: { type: 'string' } }, positionals: 0,
    async run(db, v) {
      out(await createTeam(db.sql, (v.name as string | undefined) ?? 'Unnamed team'));
    },
  },
  'teams list': {
    usage: 'teams list', summary: 'list teams with their user counts',
    options: {}, positionals: 0,
    async run(db) {
      const teams = await listTeams(db.sql);
      out(renderTable(['team_id', 'name', 'users', 'created'], teams.map((t) => [t.team_id, t.name, String(t.user_count), when(t.created_at)])));
    },
  },
  'keys create': {
    usage: 'keys create --team TEAM_ID [--name NAME] [--expires-in 90d]',
    summary: 'issue an API key; it is printed once, alone on the last line',
    options: { team: { type: 'string' }, name: { type: 'string' }, 'expires-in': { type: 'string' } }, positionals: 0,
    async run(db, v) {
      const teamId = await existingTeam(db, v.team);
      const { parseDuration } = await import('../config.js');
      const ttl = v['expires-in'] === undefined ? undefined : parseDuration(v['expires-in'] as string);
      if (ttl === null) throw new UsageError(`--expires-in must look like 30m, 24h or 90d, got "${v['expires-in']}"`);
      const issued = await issueKey(db.sql, teamId, (v.name as string | undefined) ?? 'default', ttl ? new Date(Date.now() + ttl) : null);
      process.stderr.write(`key ${issued.keyId} (${issued.displayPrefix}…) for team ${teamId}, expires ${when(issued.expiresAt)}; it will not be shown again\n`);
      out(issued.key);
    },
  },
  'keys list': {
    usage: 'keys list --team TEAM_ID', summary: "list a team's keys (never the keys themselves)",
    options: { team: { type: 'string' } }, positionals: 0,
    async run(db, v) {
      const keys = await listKeys(db.sql, await existingTeam(db, v.team));
      out(renderTable(['key_id', 'name', 'prefix', 'created', 'last_used', 'expires', 'revoked'],
        keys.map((k) => [k.key_id, k.name, k.display_prefix, when(k.created_at), when(k.last_used_at), when(k.expires_at), when(k.revoked_at)])));
    },
  },
  'keys revoke': {
    usage: 'keys revoke KEY_ID', summary: 'revoke a key (refused everywhere within a second)',
    options: {}, positionals: 1,
    async run(db, _v, [keyId]) {
      if (!(await revokeKey(db.sql, uuidArg('KEY_ID', keyId)))) throw new UsageError(`no key ${keyId}`);
      out(`revoked ${keyId}`);
    },
  },
  'keys rotate': {
    usage: 'keys rotate --team TEAM_ID [--grace 24h] [--name NAME]',
    summary: "issue a new key; the team's other keys expire after the grace period",
    options: { team: { type: 'string' }, grace: { type: 'string' }, name: { type: 'string' } }, positionals: 0,
    async run(db, v) {
      const teamId = await existingTeam(db, v.team);
      const { parseDuration } = await import('../config.js');
      const grace = parseDuration((v.grace as string | undefined) ?? '24h');
      if (grace === null) throw new UsageError(`--grace must look like 0s, 30m, 24h or 7d, got "${v.grace}"`);
      const issued = await issueKey(db.sql, teamId, (v.name as string | undefined) ?? 'rotated');
      const until = new Date(Date.now() + grace);
      const expiring = await expireOtherKeys(db.sql, teamId, issued.keyId, until);
      process.stderr.write(`key ${issued.keyId} issued; ${expiring} older key(s) expire at ${until.toISOString()}\n`);
      out(issued.key);
    },
  },
  'management-keys create': {
    usage: 'management-keys create [--label LABEL]',
    summary: 'issue a Management API key; it is printed once, alone on the last line',
    options: { label: { type: 'string' } }, positionals: 0,
    async run(db, v) {
      const issued = await issueManagementKey(db.sql, (v.label as string | undefined) ?? 'default');
      process.stderr.write(`management key ${issued.keyId} (${issued.displayPrefix}…); it will not be shown again\n`);
      out(issued.key);
    },
  },
  'management-keys list': {
    usage: 'management-keys list', summary: 'list the management keys (never the keys themselves)',
    options: {}, positionals: 0,
    async run(db) {
      const keys = await listManagementKeys(db.sql);
      out(renderTable(['key_id', 'label', 'prefix', 'created', 'last_used', 'revoked'],
        keys.map((k) => [k.key_id, k.label, k.display_prefix, when(k.created_at), when(k.last_used_at), when(k.revoked_at)])));
    },
  },
  'management-keys revoke': {
    usage: 'management-keys revoke KEY_ID', summary: 'revoke a management key (refused everywhere within a second)',
    options: {}, positionals: 1,
    async run(db, _v, [keyId]) {
      if (!(await revokeManagementKey(db.sql, uuidArg('KEY_ID', keyId)))) throw new UsageError(`no management key ${keyId}`);
      out(`revoked ${keyId}`);
    },
  },
  org: {
    usage: 'org', summary: "print the deployment's organisation id (the Management API's {org_id}) on the last line",
    options: {}, positionals: 0,
    async run(db) {
      const org = await findOrg(db.sql);
      process.stderr.write(`organisation "${org.name}", created ${org.created_on}\n`);
      out(org.id);
    },
  },
  import: {
    usage: 'import FILE|- [--method auto|bulk|merge]', summary: 'import JSON Lines of users (all or nothing; re-importing changes nothing)',
    options: { method: { type: 'string' } }, positionals: 1,
    async run(db, v, [file]) {
      const { ImportError, importUsers, isImportMethod } = await import('../import/import.js');
      const method = (v.method as string | undefined) ?? 'auto';
      if (!isImportMethod(method)) throw new UsageError(`--method must be auto, bulk or merge, got "${method}"`);
      const fromStdin = file === '-';
      if (!fromStdin && !fs.existsSync(file!)) throw new UsageError(`no such file: ${file}`);
      const input = fromStdin ? process.stdin : fs.createReadStream(file!, { highWaterMark: 1 << 20 });
      const size = fromStdin ? undefined : fs.statSync(file!).size;
      const started = Date.now();
      const show = process.stderr.isTTY ? progressPrinter(started, size) : undefined;
      try {
        const s = await importUsers(db.sql, input, show, { method });
        show?.end();
        const secs = (Date.now() - started) / 1000;
        const how = s.method === 'bulk' ? 'bulk load' : s.bulkSkipped ? `merged; no bulk load: ${s.bulkSkipped}` : 'merged';
        out(`imported ${s.lines} lines in ${secs.toFixed(1)} s (${Math.round(s.lines / Math.max(secs, 0.001))}/s): ${s.inserted} users added, ${s.updated} updated, ${s.sourceLinksChanged} connected sources changed, ${s.teams} new teams (${how})`);
      } catch (err) {
        show?.end();
        if (err instanceof ImportError) {
          process.stderr.write(`hds import: ${err.message}; nothing was imported\n`);
          process.exitCode = 1;
          return;
        }
        throw err;
      }
    },
  },
  export: {
    usage: 'export --team TEAM_ID', summary: "write the team's users as JSON Lines to standard output",
    options: { team: { type: 'string' } }, positionals: 0,
    async run(db, v) {
      const teamId = await existingTeam(db, v.team);
      const { exportUsers } = await import('../import/export.js');
      await pipeline(Readable.from(exportUsers(db.sql, teamId)), process.stdout, { end: false });
    },
  },
  purge: {
    usage: 'purge', summary: 'purge the users deleted longer ago than DELETION_GRACE (the service does it every minute too)',
    options: {}, positionals: 0,
    async run(db, _v, _p, config) {
      const purged = await purgeDeletedUsers(db.sql, config.deletionGraceMs, (users) => {
        for (const u of users) process.stderr.write(`purged user ${u.user_id} of team ${u.team_id}\n`);
      });
      out(`purged ${purged} user${purged === 1 ? '' : 's'}`);
      const compacted = await compactSparseTeams(db.sql);
      if (compacted.length > 0) out(`compacted the positions of ${compacted.length} team${compacted.length === 1 ? '' : 's'}`);
    },
  },
  check: {
    usage: 'check [--team TEAM_ID]',
    summary: "recount each team's kept counts, positions and holes from its users; exit 1 naming every difference",
    options: { team: { type: 'string' } }, positionals: 0,
    async run(db, v) {
      const teamIds = v.team === undefined ? undefined : [await existingTeam(db, v.team)];
      const { teams, drifts } = await recountTeams(db.sql, teamIds);
      for (const d of drifts) out(`team ${d.team_id}: ${d.what}: kept ${d.kept}, counted ${d.counted}`);
      if (drifts.length === 0) {
        out(`checked ${teams} team${teams === 1 ? '' : 's'}: every kept value agrees with a recount of the users`);
        return;
      }
      const differing = new Set(drifts.map((d) => d.team_id)).size;
      process.stderr.write(`hds check: ${differing} of ${teams} team${teams === 1 ? '' : 's'} differ from a recount of their users\n`);
      process.exitCode = 1;
    },
  },
  migrate: {
    usage: 'migrate', summary: 'apply pending database migrations',
    options: {}, positionals: 0,
    // openDatabase has already applied them.
    async run() { out('migrations are current'); },
  },
};

/** m:ss (or h:mm:ss) of a number of seconds. */
function clock(secs: number): string {
  const s = Math.floor(secs);
  const mmss = `${Math.floor(s / 60) % 60}:${String(s % 60).padStart(2, '0')}`;
  return s >= 3600 ? `${Math.floor(s / 3600)}:${mmss.padStart(5, '0')}` : mmss;
}

/**
 * The import's progress on one terminal line, rewritten in place: the time so far, the step, and
 * for the steps that count something (checking lines, writing users) how far and how long is
 * left; the others are redrawn every second, so that a long index build still shows it is alive.
 */
function progressPrinter(started: number, size: number | undefined) {
  let last = 0;
  let current: ImportProgress | undefined;
  let step = '';
  let stepStarted = started;
  const n = (x: number) => x.toLocaleString('en');
  const draw = () => {
    const p = current!;
    const now = Date.now();
    last = now;
    const inStep = Math.max((now - stepStarted) / 1000, 0.001);
    let text: string;
    if (p.step === 'checking') {
      const secs = Math.max((now - started) / 1000, 0.001);
      const share = size && p.bytes > 0 ? ` (${Math.floor((100 * p.bytes) / size)}%)` : '';
      const left = size && p.bytes > 0 ? `, ${clock(Math.max(0, (secs * (size - p.bytes)) / p.bytes))} left` : '';
      text = `checking lines: ${n(p.lines)}${share}, ${n(Math.round(p.lines / secs))}/s${left}`;
    } else if (p.step === 'writing') {
      const left = p.written > 0 ? `, ${clock(Math.max(0, (inStep * (p.lines - p.written)) / p.written))} left` : '';
      text = `writing users: ${n(p.written)} of ${n(p.lines)} (${Math.floor((100 * p.written) / Math.max(p.lines, 1))}%)${left}`;
    } else {
      const what = { indexing: 'building indexes', merging: 'merging with the stored users', finishing: 'finishing and committing' }[p.step];
      text = `${what} (${clock(inStep)})`;
    }
    // \x1b[K clears what a longer earlier line left to the right.
    process.stderr.write(`\r[${clock((now - started) / 1000)}] ${text}\x1b[K`);
  };
  const timer = setInterval(() => current && draw(), 1000);
  timer.unref();
  const show = (p: ImportProgress) => {
    current = p;
    if (p.step !== step) {
      step = p.step;
      stepStarted = Date.now();
      return draw();
    }
    if (Date.now() - last >= 200) draw();
  };
  return Object.assign(show, {
    /** Stops redrawing and ends the line. */
    end() {
      clearInterval(timer);
      process.stderr.write('\n');
    },
  });
}

function help(): string {
  const width = Math.max(...Object.values(COMMANDS).map((c) => c.usage.length));
  return [
    'usage: hds <command> [options]   (npm run hds -- <command>)',
    '',
    ...Object.values(COMMANDS).map((c) => `  ${c.usage.padEnd(width)}  ${c.summary}`),
    '',
    'Uses DATABASE_URL, or the embedded PostgreSQL in DATA_DIR (default ./.data), like the server.',
    'Every command takes --help.',
  ].join('\n');
}

async function main(argv: string[]): Promise<number> {
  if (argv.length === 0) throw new UsageError('no command given; see hds --help');
  if (argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    out(help());
    return 0;
  }
  const name = COMMANDS[`${argv[0]} ${argv[1]}`] ? `${argv[0]} ${argv[1]}` : argv[0]!;
  const command = COMMANDS[name];
  if (!command) throw new UsageError(`unknown command "${argv.slice(0, 2).join(' ')}"; see hds --help`);
  const rest = argv.slice(name.split(' ').length);
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options: { ...command.options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(`${(err as Error).message.split('\n')[0]}; usage: hds ${command.usage}`);
  }
  if (parsed.values.help) {
    out(`usage: hds ${command.usage}\n\n${command.summary}`);
    return 0;
  }
  if (parsed.positionals.length !== command.positionals) {
    throw new UsageError(`expected ${command.positionals || 'no'} argument${command.positionals === 1 ? '' : 's'}; usage: hds ${command.usage}`);
  }
  // Loaded only now, so that --help and a wrong argument answer without them: the configuration's
  // TypeBox took about 0.2 s of every start, and the import code (now loaded by its command) 0.3 s.
  const { ConfigError, loadConfig } = await import('../config.js');
  const { openDatabase } = await import('../db/database.js');
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    throw err instanceof ConfigError ? new UsageError(err.message) : err;
  }
  const db = await openDatabase(config, (msg) => process.stderr.write(`hds: ${msg}\n`), 'hds-cli');
  try {
    await command.run(db, parsed.values, parsed.positionals, config);
  } finally {
    await db.close();
  }
  return process.exitCode === undefined ? 0 : Number(process.exitCode);
}

// process.exit() may drop what a pipe has not taken yet: wait for stdout first.
const flushStdout = () => new Promise<void>((resolve) => process.stdout.write('', () => resolve()));

main(process.argv.slice(2)).then(
  async (code) => {
    await flushStdout();
    process.exit(code);
  },
  (err) => {
    if (err instanceof UsageError) {
      process.stderr.write(`hds: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`hds: ${(err as Error).message ?? err}\n`);
    process.exit(1);
  },
);
