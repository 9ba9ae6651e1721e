import type { FlowEdgeRow, FlowJobRow } from '../../store/dashboard.store.js';
import { formatCount } from './format.js';
import { html, type SafeHtml } from './html.js';

/** The most jobs a flow's drawing holds: the first ones by id; the table lists the rest. */
export const GRAPH_NODE_CAP = 300;
/** The most edges the drawing reads and draws (a fan-in to a drawn job can have thousands). */
export const GRAPH_EDGE_CAP = 3_000;

const NODE_W = 150;
const NODE_H = 40;
/** From one layer (a column) to the next: room for the edges' curves. */
const PITCH_X = 220;
const PITCH_Y = 56;
const PAD = 10;
/** Characters of a ref or queue name drawn in a node (the whole name is in its title). */
const LABEL_CHARS = 20;

export interface FlowDrawing {
  /** The flow's first jobs by id, at most GRAPH_NODE_CAP. */
  jobs: FlowJobRow[];
  /** The edges between them, at most GRAPH_EDGE_CAP. */
  edges: FlowEdgeRow[];
  /** How many jobs the flow has (a floor when `capped`). */
  total: number;
  capped: boolean;
  /** The edges read reached GRAPH_EDGE_CAP: some are not drawn. */
  edgesCapped: boolean;
}

/**
 * Each job's layer: the length of the longest path to it from a job without drawn parents (Kahn's order over the
 * drawn edges), so every edge points down to a later layer. A job whose parents are not drawn starts a layer 0.
 */
export function layersOf(ids: string[], edges: Pick<FlowEdgeRow, 'parent' | 'child'>[]): Map<string, number> {
  const known = new Set(ids);
  const children = new Map<string, string[]>();
  const waiting = new Map<string, number>(ids.map((id) => [id, 0]));
  for (const e of edges) {
    if (!known.has(e.parent) || !known.has(e.child)) continue;
    (children.get(e.parent) ?? children.set(e.parent, []).get(e.parent)!).push(e.child);
    waiting.set(e.child, waiting.get(e.child)! + 1);
  }
  const depth = new Map<string, number>(ids.map((id) => [id, 0]));
  const ready = ids.filter((id) => waiting.get(id) === 0);
  for (let i = 0; i < ready.length; i++) {
    const id = ready[i];
    for (const child of children.get(id) ?? []) {
      depth.set(child, Math.max(depth.get(child)!, depth.get(id)! + 1));
      const left = waiting.get(child)! - 1;
      waiting.set(child, left);
      if (left === 0) ready.push(child);
    }
  }
  // The engine refuses cycles, so every job is reached; one that is not keeps layer 0 rather than vanish.
  return depth;
}

/** Text cut to LABEL_CHARS characters (whole code points), with an ellipsis when cut. */
function label(text: string): string {
  const chars = Array.from(text);
  return chars.length > LABEL_CHARS ? `${chars.slice(0, LABEL_CHARS - 1).join('')}…` : text;
}

/** What a node's tooltip says: its ref, id, queue and status, what a blocked job waits for, what a compensation undoes. */
export function nodeTitle(job: FlowJobRow, refOf: Map<string, string | null>): string {
  const parts = [`${job.ref ?? `job ${job.id}`} (job ${job.id})`, `queue ${job.queue_name}`, job.status];
  if (job.status === 'blocked' && job.waiting_for) parts.push(`waiting for ${waitingText(job.waiting_for, job.waiting)}`);
  if (job.compensates) parts.push(`compensates ${refOf.get(job.compensates) ?? `job ${job.compensates}`}`);
  return parts.join(' · ');
}

/** "a, b and 3 more": the refs listed, and how many are not (the count is a floor at its cap). */
export function waitingText(refs: string[], count: number | null): string {
  // Blocked with every edge resolved: the second look after its last parent's commit was missed (a worker died
  // between the two); the sweeper's safety net unblocks it.
  if (refs.length === 0) return 'no parent (all are done: the sweeper unblocks it)';
  const more = (count ?? refs.length) - refs.length;
  return `${refs.join(', ')}${more > 0 ? ` and ${formatCount(more)} more` : ''}`;
}

/**
 * The flow's DAG as an inline SVG drawn on the server: jobs in layers by dependency depth, one column per layer
 * from left to right (a fan-out of 300 is a tall column in a scrolling box, and no edge runs through a layer's own
 * jobs), each column ordered by where its parents sit (fewer crossings), edges as curves from parent to child,
 * nodes coloured by status and linked to their job's page. No script: the tooltip is the node's <title>.
 */
export function flowGraph(base: string, d: FlowDrawing): SafeHtml {
  if (d.jobs.length === 0) return html`<p class="muted">This flow has no jobs left (the pruner deletes a finished flow's jobs after their retention).</p>`;
  const ids = d.jobs.map((j) => j.id);
  const depth = layersOf(ids, d.edges);
  const parentsOf = new Map<string, string[]>();
  for (const e of d.edges) (parentsOf.get(e.child) ?? parentsOf.set(e.child, []).get(e.child)!).push(e.parent);
  const layers: FlowJobRow[][] = [];
  for (const job of d.jobs) (layers[depth.get(job.id)!] ??= []).push(job);

  const pos = new Map<string, { x: number; y: number }>();
  let tallest = 0;
  layers.forEach((layer, column) => {
    // Barycentre ordering: a job goes where its drawn parents are, on average (ties keep id order).
    const centre = (job: FlowJobRow) => {
      const ys = (parentsOf.get(job.id) ?? []).map((p) => pos.get(p)?.y).filter((y): y is number => y !== undefined);
      return ys.length ? ys.reduce((a, b) => a + b, 0) / ys.length : 0;
    };
    const ordered = layer.map((job, i) => ({ job, i, c: centre(job) })).sort((a, b) => a.c - b.c || a.i - b.i);
    ordered.forEach(({ job }, i) => pos.set(job.id, { x: PAD + column * PITCH_X, y: PAD + i * PITCH_Y }));
    tallest = Math.max(tallest, layer.length);
  });
  const width = 2 * PAD + (layers.length - 1) * PITCH_X + NODE_W;
  const height = 2 * PAD + (tallest - 1) * PITCH_Y + NODE_H;
  const refOf = new Map(d.jobs.map((j) => [j.id, j.ref]));

  const edges = d.edges.map((e) => {
    const from = pos.get(e.parent);
    const to = pos.get(e.child);
    if (!from || !to) return null;
    const [x1, y1, x2, y2] = [from.x + NODE_W, from.y + NODE_H / 2, to.x, to.y + NODE_H / 2];
    const bend = Math.min(50, (x2 - x1) / 2);
    const classes = `edge ${e.done ? 'done' : 'open'}${e.on_failure === 'continue' ? ' continue' : ''}`;
    const title = `${refOf.get(e.parent) ?? e.parent} → ${refOf.get(e.child) ?? e.child} (on failure: ${e.on_failure}; ${e.done ? 'resolved' : 'open'})`;
    return html`<path class="${classes}" marker-end="url(#pgq-arrow)" d="M${x1} ${y1} C${x1 + bend} ${y1} ${x2 - bend} ${y2} ${x2} ${y2}"><title>${title}</title></path>`;
  });
  const nodes = d.jobs.map((job) => {
    const { x, y } = pos.get(job.id)!;
    const compensation = job.compensates !== null;
    return html`<a href="${base}/jobs/${job.id}" data-node="${job.id}"><g class="node st-${job.status}${compensation ? ' compensation' : ''}"><title>${nodeTitle(job, refOf)}</title>
<rect x="${x}" y="${y}" width="${NODE_W}" height="${NODE_H}" rx="5"></rect><text x="${x + 8}" y="${y + 16}" class="ref">${compensation ? '↺ ' : ''}${label(job.ref ?? `job ${job.id}`)}</text><text x="${x + 8}" y="${y + 32}" class="sub">${label(job.queue_name)} · ${job.status}</text></g></a>`;
  });
  const shown = d.jobs.length;
  const summary = `The flow's jobs and their dependencies: ${shown} job${shown === 1 ? '' : 's'} drawn${d.total > shown ? ` of ${d.capped ? 'over ' : ''}${formatCount(d.total)}` : ''}`;
  const notes = [
    d.total > shown ? html`<p class="muted" data-field="graph_cap">The first ${formatCount(shown)} jobs (by id) are drawn; ${d.capped ? 'over ' : ''}${formatCount(d.total - shown)} more are in the table below.</p>` : null,
    d.edgesCapped ? html`<p class="muted">Only the first ${formatCount(d.edges.length)} edges between the drawn jobs are drawn.</p>` : null,
  ];
  return html`<div class="dag"><svg viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${summary}"><title>${summary}</title>
<defs><marker id="pgq-arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" orient="auto"><path d="M0 0 L8 4 L0 8 z"></path></marker></defs>
${edges}
${nodes}
</svg></div>
<p class="legend muted">Arrows point from a job to the jobs that wait for it (left to right). A grey line is resolved, a dark one open, a
dashed one a <code>continue</code> dependency; a dashed box (↺) is a compensation job. Hover a job for what it waits for.</p>
${notes}`;
}
