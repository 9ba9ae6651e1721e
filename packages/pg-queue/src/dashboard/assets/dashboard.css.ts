// The dashboard's style sheet, served from the package at <path>/assets/dashboard.css (no CDN, no build step).
export const DASHBOARD_CSS = `
:root { --fg:#1d2327; --muted:#646970; --line:#dcdcde; --bg:#f6f7f7; --card:#fff; --ok:#2e7d32; --bad:#c62828; --warn:#b26a00; --link:#2252a3; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color:var(--fg); background:var(--bg); }
header { display:flex; gap:1.5rem; align-items:center; padding:.6rem 1.2rem; background:#1d2327; color:#fff; }
header a { color:#dbe6ff; text-decoration:none; margin-right:1rem; }
header a[aria-current] { color:#fff; font-weight:600; border-bottom:2px solid #fff; }
.brand { font-size:1.05rem; }
.databases { padding-left:1rem; border-left:1px solid #50575e; }
.databases::before { content:"Database"; color:#c3c4c7; font-size:.8rem; margin-right:.8rem; }
.who { margin-left:auto; color:#c3c4c7; font-size:.85rem; }
.updated:not(:empty)::before { content:" · "; }
main { padding:1rem 1.2rem 3rem; }
main > p, main > dl.fields, main > .progress { max-width:75rem; }
h1 { font-size:1.35rem; margin:.3rem 0 1rem; }
h2 { font-size:1.1rem; margin:1.4rem 0 .6rem; }
a { color:var(--link); }
table { border-collapse:collapse; width:100%; background:var(--card); border:1px solid var(--line); }
th, td { text-align:left; padding:.35rem .6rem; border-bottom:1px solid var(--line); vertical-align:top; }
th { background:#f0f0f1; font-weight:600; font-size:.85rem; white-space:nowrap; }
th.n, td.n { text-align:right; font-variant-numeric:tabular-nums; }
.approx { color:var(--warn); }
.status { display:inline-block; padding:0 .45rem; border-radius:.6rem; font-size:.8rem; background:#e7e8ea; }
.status-failed { background:#fde2e1; color:var(--bad); }
.status-completed { background:#e3f4e4; color:var(--ok); }
.status-processing { background:#e1ecfd; color:#1b4aa0; }
.status-cancelled { background:#eee; color:var(--muted); }
.status-blocked { background:#fff3dc; color:var(--warn); }
.status-running, .status-failing, .status-compensating { background:#e1ecfd; color:#1b4aa0; }
.status-compensated { background:#fff3dc; color:var(--warn); }
.status-compensation_failed { background:#fde2e1; color:var(--bad); }
.event-failed, .event-dead, .event-stalled { background:#fde2e1; color:var(--bad); }
.event-completed { background:#e3f4e4; color:var(--ok); }
.event-started { background:#e1ecfd; color:#1b4aa0; }
.event-retrying, .event-returned { background:#fff3dc; color:var(--warn); }
table.events code { font-size:.75rem; color:var(--muted); }
.paused { color:var(--warn); font-weight:600; }
.unserved { color:var(--warn); font-weight:600; margin-left:.4rem; }
tr.gone td, tr.gone th { opacity:.7; }
.flash { background:#e3f4e4; border:1px solid #b7dfb9; padding:.5rem .8rem; border-radius:4px; }
.error { background:#fde2e1; border:1px solid #f3b6b3; padding:.5rem .8rem; border-radius:4px; }
.muted { color:var(--muted); }
form.action { display:inline; margin:0 .2rem 0 0; }
button { font:inherit; padding:.2rem .7rem; border:1px solid #8c8f94; border-radius:3px; background:#fff; cursor:pointer; }
button:hover { background:#f0f0f1; }
button.danger { border-color:var(--bad); color:var(--bad); }
.filters { display:flex; flex-wrap:wrap; gap:.6rem; align-items:end; margin-bottom:.8rem; }
.filters label { display:flex; flex-direction:column; font-size:.8rem; color:var(--muted); }
.filters input, .filters select { font:inherit; padding:.2rem .4rem; }
.filters textarea { font-family:ui-monospace, monospace; padding:.2rem .4rem; max-width:100%; box-sizing:border-box; }
.bulk { margin:.6rem 0; padding:.5rem .7rem; background:var(--card); border:1px dashed var(--line); }
.pager { margin:.8rem 0; display:flex; gap:1rem; align-items:center; }
.cards { display:grid; grid-template-columns:repeat(auto-fill, minmax(380px, 1fr)); gap:.8rem; }
.card { background:var(--card); border:1px solid var(--line); padding:.6rem .8rem; }
.card h3 { margin:0 0 .3rem; font-size:1rem; }
figure.chart { margin:0; }
figure.chart svg { width:100%; height:90px; display:block; }
figure.chart figcaption { font-size:.8rem; color:var(--muted); }
svg .c { fill:#66bb6a; } svg .f { fill:#e57373; } svg .axis { stroke:#c3c4c7; }
svg .rate { fill:none; stroke:var(--bad); stroke-width:1.5; } svg circle.rate { fill:var(--bad); stroke:none; }
dl.fields { display:grid; grid-template-columns:max-content 1fr; gap:.25rem 1rem; background:var(--card); border:1px solid var(--line); padding:.7rem; }
dl.fields dt { font-weight:600; color:var(--muted); }
dl.fields dd { margin:0; }
pre { background:#fff; border:1px solid var(--line); padding:.6rem; overflow:auto; max-height:28rem; white-space:pre-wrap; word-break:break-word; }
ol.timeline { background:var(--card); border:1px solid var(--line); padding:.6rem 2rem; }
.confirm-question { font-size:1.05rem; }
ul.counts { list-style:none; margin:0; padding:0; display:flex; flex-wrap:wrap; gap:.3rem 1rem; }
.dag { overflow:auto; max-height:48rem; background:var(--card); border:1px solid var(--line); }
.dag svg { display:block; }
.dag .edge { fill:none; stroke:#3c434a; stroke-width:1.2; }
.dag .edge.done { stroke:#c3c4c7; }
.dag .edge.continue { stroke-dasharray:4 3; }
.dag marker path { fill:#8c8f94; }
.dag .node rect { fill:#f0f0f1; stroke:#8c8f94; }
.dag .node text { font-size:12px; fill:var(--fg); }
.dag .node text.sub { font-size:10px; fill:var(--muted); }
.dag a:hover rect { stroke:var(--link); stroke-width:2; }
.dag .node.compensation rect { stroke-dasharray:5 3; }
.dag .st-completed rect { fill:#e3f4e4; stroke:var(--ok); }
.dag .st-failed rect { fill:#fde2e1; stroke:var(--bad); }
.dag .st-processing rect { fill:#e1ecfd; stroke:#1b4aa0; }
.dag .st-blocked rect { fill:#fff3dc; stroke:var(--warn); }
.dag .st-cancelled rect { fill:#eee; stroke:#c3c4c7; }
.legend { font-size:.8rem; }
.status-due { background:#e7e8ea; }
.status-scheduled { background:#f3ecfb; color:#5b2c91; }
ol.fires { margin:0; padding-left:1.2rem; }
.status-sleeping { background:#e6f0f5; color:#1e5a78; }
table tr.run th { background:#f6f7f7; font-size:.8rem; color:var(--muted); border-top:2px solid var(--line); }
pre.log { margin:0; padding:.15rem .4rem; border:0; background:transparent; max-height:14rem; }
details.stack summary { cursor:pointer; overflow-wrap:anywhere; }
details.stack pre { margin:.3rem 0 0; font-size:.85rem; }
.scroll { overflow-x:auto; -webkit-overflow-scrolling:touch; }
td.when, td.n, time { white-space:nowrap; }
td.error-cell { min-width:14rem; max-width:40rem; overflow-wrap:anywhere; }
td.wide { max-width:24rem; overflow-wrap:anywhere; }
.earlier { font-style:italic; }
.live-toggle { margin-left:auto; background:transparent; color:#dbe6ff; border-color:#646970; font-size:.8rem; padding:.1rem .5rem; }
.live-toggle:hover { background:#2c3338; }
.live-toggle[aria-pressed="true"] { color:#fff; border-color:var(--warn); background:#50370a; }
.live-toggle + .who { margin-left:0; }
th.pick, td.pick { width:1.6rem; padding-right:0; }
.selection { margin:.6rem 0; padding:.4rem .7rem; background:var(--card); border:1px solid var(--line); display:flex; flex-wrap:wrap; gap:.4rem; align-items:center; }
.selection button { margin:0; }
.warning { background:#fff3dc; border:1px solid #f0d399; padding:.5rem .8rem; border-radius:4px; }
.progress { display:flex; align-items:center; gap:.6rem; margin:.4rem 0 .8rem; }
.progress progress { width:min(24rem, 60vw); height:1rem; }
.chart-grid { display:grid; grid-template-columns:auto 1fr auto; column-gap:.35rem; }
.y-axis { display:flex; flex-direction:column; justify-content:space-between; height:90px; font-size:.7rem; color:var(--muted); text-align:right; font-variant-numeric:tabular-nums; }
.rate-axis { text-align:left; color:var(--bad); }
.x-axis { grid-column:2; display:flex; justify-content:space-between; font-size:.7rem; color:var(--muted); }
svg .grid { stroke:#e7e8ea; stroke-dasharray:3 3; }
svg .p50, svg .p95 { fill:none; stroke:#1b4aa0; stroke-width:1.5; vector-effect:non-scaling-stroke; }
svg .p95 { stroke:#b26a00; stroke-dasharray:4 3; }
svg circle.p50 { fill:#1b4aa0; stroke:none; } svg circle.p95 { fill:#b26a00; stroke:none; }
svg .tip { fill:transparent; }
.p50 { color:#1b4aa0; font-weight:600; } .p95 { color:#b26a00; font-weight:600; }
.chart-grid > div:empty { width:0; }
@media (max-width: 720px) {
  header { flex-wrap:wrap; gap:.4rem 1rem; padding:.5rem .8rem; }
  header nav { order:3; width:100%; display:flex; overflow-x:auto; white-space:nowrap; }
  header nav.databases { order:4; border-left:0; padding-left:0; }
  header a { margin-right:.9rem; }
  header nav a { margin-right:.55rem; font-size:.85rem; }
  header nav a:last-child { margin-right:0; }
  .who { margin-left:auto; font-size:.75rem; }
  main { padding:.6rem .6rem 2rem; }
  .cards { grid-template-columns:1fr; }
  .filters label, .filters input, .filters select, .filters textarea { width:100%; }
  .filters { flex-direction:column; align-items:stretch; }
  th.wide, td.wide { display:none; }
  /* Tables marked "stack": one block per row, each cell labelled, nothing wider than the screen. */
  table.stack, table.stack > tbody { display:block; width:100%; }
  table.stack > thead { display:none; }
  table.stack > tbody > tr { display:flex; flex-wrap:wrap; gap:.15rem .9rem; padding:.4rem .6rem; border-bottom:1px solid var(--line); }
  table.stack > tbody > tr > td, table.stack > tbody > tr > th { display:block; border:0; padding:0; min-width:0; text-align:left; }
  table.stack > tbody > tr > th[scope="row"] { flex-basis:100%; font-size:1rem; }
  table.stack td[data-label]::before { content:attr(data-label) ": "; color:var(--muted); font-size:.75rem; }
  table.stack td.error-cell, table.stack td.full { flex-basis:100%; min-width:0; max-width:none; }
  table.stack td:empty { display:none; }
  table.stack > tbody > tr > td.wide { display:none; }
  dl.fields { grid-template-columns:1fr; }
  dl.fields dd { margin-bottom:.3rem; }
  button { padding:.35rem .8rem; }
}
`;
