// The dashboard's script, served from the package at <path>/assets/dashboard.js. Progressive enhancement
// only: every page and action works without it. It asks before an action (the server would otherwise
// answer with a confirmation page) and, on the overview, polls the summary endpoint (one count statement per
// interval, plus a sample when a count is estimated) to refresh the counts in place; it stops polling while the tab is hidden.
export const DASHBOARD_JS = `(function () {
  'use strict';
  document.addEventListener('submit', function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute('data-confirm')) return;
    if (!window.confirm(form.getAttribute('data-confirm'))) { event.preventDefault(); return; }
    var mark = document.createElement('input');
    mark.type = 'hidden'; mark.name = 'confirmed'; mark.value = '1';
    form.appendChild(mark);
  });
  var body = document.body;
  var url = body.getAttribute('data-summary');
  var every = Number(body.getAttribute('data-refresh-ms'));
  if (!url || !(every > 0)) return;
  var stamp = document.querySelector('.updated');
  function show(data) {
    var cells = document.querySelectorAll('[data-count]');
    for (var i = 0; i < cells.length; i++) {
      var key = cells[i].getAttribute('data-count').split('|');
      var counts = data.counts[key[0]];
      var n = counts ? counts[key[1]] : 0;
      var approx = counts && counts.approximate && counts.approximate.indexOf(key[1]) >= 0;
      cells[i].textContent = (approx ? '\\u2248' : '') + Number(n || 0).toLocaleString('en');
    }
    if (stamp) stamp.textContent = 'counts at ' + new Date(data.at).toLocaleTimeString();
  }
  function poll() {
    if (document.hidden) return;
    fetch(url, { credentials: 'same-origin', headers: { accept: 'application/json' } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) { if (data) show(data); })
      .catch(function () {});
  }
  setInterval(poll, every);
})();
`;
