import { num, type BenchReport } from './report.js';

/**
 * A hand-written SVG: for each scenario, its floor's throughput and the
 * service's (one bar per WORKERS pass), on that scenario's own scale, so that
 * a 401 at 20,000 req/s and a 500-user page at 500 req/s both stay readable.
 * List scenarios have a bar for the PostgreSQL anchor (the page statement
 * straight on the database) below the floor's. A tick on the service bar
 * marks the floor target where there is one; a red bar is a missed target
 * (or errors).
 */
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

const COLORS = ['#2b6cb0', '#2f855a', '#b7791f', '#9b2c2c'];
const FLOOR = '#a0aec0';

const ANCHOR = '#6b46c1';

export function renderChart(report: BenchReport): string {
  const passes = report.passes;
  const ids = passes[0]?.scenarios.map((s) => s.id) ?? [];
  const labelW = 440, barW = 460, valueW = 400, left = 16, top = 64, bar = 14, gap = 4, groupGap = 18;
  const width = left + labelW + barW + valueW;
  // A group: the floor's bar, PostgreSQL's for list scenarios, then one per pass.
  const hasAnchor = (id: string) => passes.some((p) => p.scenarios.find((s) => s.id === id)?.anchor);
  const groupH = (id: string) => (passes.length + 1 + (hasAnchor(id) ? 1 : 0)) * (bar + gap) + groupGap;
  const height = top + ids.reduce((h, id) => h + groupH(id), 0) + 40;
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, sans-serif" font-size="12">`);
  parts.push(`<rect width="100%" height="100%" fill="#fff"/>`);
  parts.push(`<text x="${left}" y="24" font-size="16" font-weight="bold">Throughput per scenario against its floor (requests/s)</text>`);
  parts.push(`<text x="${left}" y="44" fill="#4a5568">${esc(`${num(report.dataset.users)} users, ${report.settings.connections} connections, ${report.settings.durationS} s each, ${report.startedAt}`)}</text>`);
  // Legend.
  const legend = [
    { name: 'floor (bare Fastify, bytes from memory)', color: FLOOR },
    ...(ids.some(hasAnchor) ? [{ name: 'PostgreSQL (the page statement)', color: ANCHOR }] : []),
    ...passes.map((p, i) => ({ name: `service, WORKERS=${p.workers}`, color: COLORS[i % COLORS.length]! })),
  ];
  let lx = left + labelW;
  for (const item of legend) {
    parts.push(`<rect x="${lx}" y="${height - 26}" width="12" height="12" fill="${item.color}"/>`);
    parts.push(`<text x="${lx + 16}" y="${height - 16}">${esc(item.name)}</text>`);
    lx += 32 + item.name.length * 7.5;
  }
  let y0 = top;
  ids.forEach((id, g) => {
    const rows = passes.map((p) => p.scenarios.find((s) => s.id === id)!);
    const floorRps = Math.max(...rows.map((r) => r.floor.requestsPerSec));
    const anchorRps = hasAnchor(id) ? Math.max(...rows.map((r) => r.anchor?.requestsPerSec ?? 0)) : undefined;
    const scale = Math.max(floorRps, anchorRps ?? 0, ...rows.map((r) => r.service.requestsPerSec), 1);
    parts.push(`<text x="${left}" y="${y0 + bar}" font-weight="bold">${esc(`${g + 1}. ${rows[0]!.title}`)}</text>`);
    parts.push(`<text x="${left}" y="${y0 + 2 * bar + gap}" fill="#4a5568">${esc(rows[0]!.target)}</text>`);
    const x0 = left + labelW;
    const w = (rps: number) => Math.max(1, (rps / scale) * barW);
    const plain = (y: number, rps: number, color: string) => {
      parts.push(`<rect x="${x0}" y="${y}" width="${w(rps).toFixed(1)}" height="${bar}" fill="${color}"/>`);
      parts.push(`<text x="${x0 + w(rps) + 6}" y="${y + bar - 3}">${num(rps)}</text>`);
    };
    plain(y0, floorRps, FLOOR);
    let y = y0 + bar + gap;
    if (anchorRps !== undefined) {
      plain(y, anchorRps, ANCHOR);
      y += bar + gap;
    }
    rows.forEach((r, i) => {
      const color = r.pass ? COLORS[i % COLORS.length]! : '#c53030';
      parts.push(`<rect x="${x0}" y="${y}" width="${w(r.service.requestsPerSec).toFixed(1)}" height="${bar}" fill="${color}"/>`);
      let labelX = x0 + w(r.service.requestsPerSec) + 6;
      const m = /(?:^|, )>= ([\d.]+)x floor/.exec(r.target);
      if (m) {
        const tx = x0 + (Number(m[1]) * r.floor.requestsPerSec / scale) * barW;
        parts.push(`<line x1="${tx.toFixed(1)}" x2="${tx.toFixed(1)}" y1="${y - 2}" y2="${y + bar + 2}" stroke="#1a202c" stroke-width="2"/>`);
        labelX = Math.max(labelX, tx + 6);
      }
      const vsAnchor = r.anchorRatio !== undefined ? `, ${r.anchorRatio.toFixed(2)}x PostgreSQL` : '';
      parts.push(`<text x="${labelX.toFixed(1)}" y="${y + bar - 3}">${esc(`WORKERS=${passes[i]!.workers}: ${num(r.service.requestsPerSec)} (${r.floorRatio.toFixed(2)}x${vsAnchor}, p99 ${r.service.p99Ms.toFixed(1)} ms)${r.pass ? '' : ' missed'}`)}</text>`);
      y += bar + gap;
    });
    y0 += groupH(id);
  });
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}
