/**
 * An ESLint rule that keeps the dependencies between the parts of src/
 * running one way: a file may import from its own part or from a part of a
 * lower layer, never from a higher one, and two parts of one layer may not
 * import each other. A part is a folder directly under src/ or a file there.
 */
import path from 'node:path';

/** The parts of src/, top layer first. */
export const LAYERS = [
  ['server.ts'],
  ['cluster.ts', 'cli'],
  ['demo-seed.ts'],
  ['app.ts'],
  // Webhook delivery: the dispatcher that every server process runs beside the API.
  ['events'],
  // The resources: the user resource, the bulk import/export engine, the Management API.
  ['users', 'import', 'management'],
  // Every write to a team's users: the team's derived state, the stored user's columns.
  ['writes'],
  // HTTP plumbing: errors to the wire, logging, limits, OpenAPI, probes, metrics.
  ['http'],
  ['auth', 'teams'],
  ['db'],
  // The one Ajv setup and the 422 items, used by the routes and the import alike.
  ['validation'],
  // The stored user document: its builder, time formats and value rules.
  ['user-document'],
  ['config.ts', 'errors', 'bounded-map.ts', 'loop-clock.ts'],
];

const SRC = path.resolve(import.meta.dirname, '..', 'src');

const layerOf = new Map(LAYERS.flatMap((parts, i) => parts.map((part) => [part, i])));

/** The part of src/ that `file` (absolute) belongs to, or undefined outside src/. */
function partOf(file) {
  const rel = path.relative(SRC, file);
  if (rel.startsWith('..') || path.isAbsolute(rel)) return undefined;
  const [first] = rel.split(path.sep);
  // Imports name the compiled file (./x.js); the source is x.ts.
  return first.replace(/\.js$/, '.ts');
}

const describeLayers = () => LAYERS.map((parts) => parts.map((p) => (p.endsWith('.ts') ? p : `${p}/`)).join(' ')).join(' → ');
const shown = (part) => (part.endsWith('.ts') ? `src/${part}` : `src/${part}/`);

/** @type {import('eslint').Rule.RuleModule} */
const direction = {
  meta: {
    type: 'problem',
    docs: { description: 'imports between the parts of src/ run from higher layers to lower ones only' },
    schema: [],
  },
  create(context) {
    const from = partOf(context.filename);
    if (from === undefined) return {};
    const fromLayer = layerOf.get(from);
    if (fromLayer === undefined) {
      return { Program: (node) => context.report({ node, message: `${shown(from)} is in no layer of tools/import-layers.js: add it to LAYERS` }) };
    }
    const check = (node, specifier) => {
      if (typeof specifier !== 'string' || !specifier.startsWith('.')) return;
      const to = partOf(path.resolve(path.dirname(context.filename), specifier));
      if (to === undefined || to === from) return;
      const toLayer = layerOf.get(to);
      if (toLayer === undefined) {
        context.report({ node, message: `${shown(to)} is in no layer of tools/import-layers.js: add it to LAYERS` });
      } else if (toLayer < fromLayer) {
        context.report({ node, message: `${shown(from)} may not import ${shown(to)}, which sits above it (${describeLayers()})` });
      } else if (toLayer === fromLayer) {
        context.report({ node, message: `${shown(from)} and ${shown(to)} share a layer and may not import each other (${describeLayers()})` });
      }
    };
    const fromSource = (node) => node.source && check(node, node.source.value);
    return {
      ImportDeclaration: fromSource,
      ExportNamedDeclaration: fromSource,
      ExportAllDeclaration: fromSource,
      ImportExpression: (node) => node.source.type === 'Literal' && check(node, node.source.value),
    };
  },
};

export default { rules: { direction } };
