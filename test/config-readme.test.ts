/**
 * The README's configuration table against the schema it documents (src/config.ts):
 * the same variables, and for each the same default and the same meaning.
 *
 * A Default cell is the schema's default in backticks (`8000`, `./.data`, `true`), or
 * `unset` for a variable without one (it may be left unset: a list is then empty, any
 * other value undefined). A Meaning cell is the field's description, word for word.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { CONFIG_VARIABLES, type ConfigVariable } from '../src/config.js';
import { ROOT } from './helpers.js';

interface Row {
  variable: string;
  default: string;
  meaning: string;
}

const defaultCell = (v: ConfigVariable): string => (v.default === undefined ? 'unset' : `\`${String(v.default)}\``);

/** The rows of the Variable | Default | Meaning table under "## Configuration". */
function tableRows(markdown: string): Row[] {
  const section = markdown.split(/^## /m).find((s) => s.startsWith('Configuration\n'));
  assert.ok(section !== undefined, 'README.md has a "## Configuration" section');
  const lines = section.split('\n').filter((line) => line.startsWith('|'));
  // A `|` inside a cell would shift the columns: each line must have exactly three cells.
  const cells = lines.map((line) => {
    const row = line.trim().replace(/^\||\|$/g, '').split('|').map((cell) => cell.trim());
    assert.equal(row.length, 3, `three cells in ${JSON.stringify(line)}`);
    return row as [string, string, string];
  });
  const [header, separator, ...body] = cells;
  assert.deepEqual(header, ['Variable', 'Default', 'Meaning'], 'the first table under "## Configuration" is Variable | Default | Meaning');
  assert.ok(separator?.every((cell) => /^:?-+:?$/.test(cell)), 'the header is followed by its separator line');
  return body.map(([variable, fallback, meaning]) => {
    const name = /^`([A-Z][A-Z0-9_]*)`$/.exec(variable)?.[1];
    assert.ok(name !== undefined, `a Variable cell is a backticked name, got ${JSON.stringify(variable)}`);
    return { variable: name, default: fallback, meaning };
  });
}

/** Every way `rows` and `variables` disagree, one line each; empty when they agree. */
function differences(rows: readonly Row[], variables: readonly ConfigVariable[]): string[] {
  const found: string[] = [];
  const byName = new Map<string, Row>();
  for (const row of rows) {
    if (byName.has(row.variable)) found.push(`${row.variable}: listed twice in README.md`);
    byName.set(row.variable, row);
  }
  const inSchema = new Set(variables.map((v) => v.env));
  for (const row of rows) {
    if (!inSchema.has(row.variable)) found.push(`${row.variable}: in README.md, not in the schema (src/config.ts)`);
  }
  for (const v of variables) {
    const row = byName.get(v.env);
    if (row === undefined) {
      found.push(`${v.env}: in the schema (src/config.ts), not in README.md`);
      continue;
    }
    if (row.default !== defaultCell(v)) found.push(`${v.env}: README.md's default is ${row.default}, the schema's is ${defaultCell(v)}`);
    if (row.meaning !== v.description) found.push(`${v.env}: README.md's meaning is ${JSON.stringify(row.meaning)}, the schema's description is ${JSON.stringify(v.description)}`);
  }
  return found;
}

const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');

describe('README configuration table', () => {
  it('lists every variable of the schema, with its default and meaning, and nothing else', () => {
    const problems = differences(tableRows(readme), CONFIG_VARIABLES);
    assert.deepEqual(problems, [], `README.md's "## Configuration" table disagrees with src/config.ts:\n  ${problems.join('\n  ')}`);
  });

  it('uses one form for defaults: backticked text, or unset', () => {
    const byName = new Map(CONFIG_VARIABLES.map((v) => [v.env, v]));
    assert.equal(defaultCell(byName.get('PORT')!), '`8000`');
    assert.equal(defaultCell(byName.get('DATA_DIR')!), '`./.data`');
    assert.equal(defaultCell(byName.get('DEMO_SEED')!), '`true`');
    assert.equal(defaultCell(byName.get('DATABASE_URL')!), 'unset');
    assert.equal(defaultCell(byName.get('CORS_ORIGINS')!), 'unset');
  });

  // The check above is only worth something if it notices each kind of drift.
  it('notices a variable, a default or a meaning changed on one side only', () => {
    const rows = tableRows(readme);
    const port = CONFIG_VARIABLES.find((v) => v.env === 'PORT')!;
    const others = CONFIG_VARIABLES.filter((v) => v !== port);
    const added: ConfigVariable = { env: 'NEW_KNOB', default: 3, description: 'a knob' };

    assert.deepEqual(differences(rows, [...CONFIG_VARIABLES, added]), ['NEW_KNOB: in the schema (src/config.ts), not in README.md']);
    assert.deepEqual(differences(rows, others), ['PORT: in README.md, not in the schema (src/config.ts)']);
    assert.deepEqual(differences(rows, [...others, { ...port, default: 8080 }]), ['PORT: README.md\'s default is `8000`, the schema\'s is `8080`']);
    assert.deepEqual(differences(rows, [...others, { ...port, default: undefined }]), ['PORT: README.md\'s default is `8000`, the schema\'s is unset']);
    assert.equal(differences(rows, [...others, { ...port, description: 'the port' }]).length, 1);
    assert.deepEqual(differences([...rows, rows[0]!], CONFIG_VARIABLES), [`${rows[0]!.variable}: listed twice in README.md`]);
  });
});
