// The dashboard's script, served from the package at <path>/assets/dashboard.js. Progressive enhancement
// only: every page and action works without it. It asks before an action (the server would otherwise
// answer with a confirmation page), counts and ticks the jobs list's selection, shows times in the viewer's
// zone, and keeps pages live: on the overview it polls the summary endpoint (one count read per interval) to
// refresh the counts in place; a page marked live (a job that has not finished, the jobs list's first page)
// fetches itself and swaps its live regions in place (the ticked jobs stay ticked). It does none of that while
// the tab is hidden or the viewer has pressed "Pause live updates" (remembered for the tab's session).
export const DASHBOARD_JS = `(function () {
  'use strict';
  var body = document.body;
  var stamp = document.querySelector('.updated');
  // A time as the server writes it (formatTime: "2026-12-06 13:03:12 UTC"), in the viewer's own zone.
  function localTime(date) {
    var p = {};
    new Intl.DateTimeFormat('en-CA', { year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23', timeZoneName: 'short' })
      .formatToParts(date).forEach(function (x) { p[x.type] = x.value; });
    return p.year + '-' + p.month + '-' + p.day + ' ' + p.hour + ':' + p.minute + ':' + p.second + ' ' + p.timeZoneName;
  }
  // <time data-local>: the text becomes the viewer's zone; a relative time ("3 min ago") keeps its text and gets the
  // local time and the ISO time in its title.
  function localize(root) {
    var times = root.querySelectorAll('time[datetime]');
    for (var i = 0; i < times.length; i++) {
      var d = new Date(times[i].getAttribute('datetime'));
      if (isNaN(d.getTime())) continue;
      var iso = d.toISOString();
      if (times[i].hasAttribute('data-local')) { times[i].textContent = localTime(d); times[i].title = iso; }
      else times[i].title = localTime(d) + ' (' + iso + ')';
    }
  }
  localize(document);
  var paused = false;
  try { paused = sessionStorage.getItem('pg-queue-live') === 'paused'; } catch (e) { paused = false; }
  var toggle = document.querySelector('button[data-live-toggle]');
  function showToggle() {
    if (!toggle) return;
    toggle.textContent = paused ? 'Resume live updates' : 'Pause live updates';
    toggle.setAttribute('aria-pressed', paused ? 'true' : 'false');
    body.classList.toggle('live-paused', paused);
  }
  if (toggle) {
    toggle.hidden = false;
    toggle.addEventListener('click', function () {
      paused = !paused;
      try { sessionStorage.setItem('pg-queue-live', paused ? 'paused' : 'live'); } catch (e) { /* private mode */ }
      showToggle();
    });
    showToggle();
  }
  function idle() { return document.hidden || paused; }
  // getAttribute, not form.id: the ticked inputs are named "id", and a form's named elements shadow its properties.
  function pickedBoxes(form) {
    return document.querySelectorAll('input[type="checkbox"][name="id"][form="' + form.getAttribute('id') + '"]');
  }
  function picked(form) {
    var boxes = pickedBoxes(form);
    var n = 0;
    for (var i = 0; i < boxes.length; i++) if (boxes[i].checked) n++;
    return n;
  }
  document.addEventListener('submit', function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement)) return;
    var submitter = event.submitter;
    var question = (submitter && submitter.getAttribute('data-confirm')) || form.getAttribute('data-confirm');
    if (!question) return;
    if (form.hasAttribute('data-selection')) {
      var n = picked(form);
      if (n === 0) { event.preventDefault(); window.alert('No job selected: tick the jobs to act on first.'); return; }
      question = question.split('{jobs}').join(n === 1 ? 'the selected job' : 'the ' + n + ' selected jobs');
    }
    if (!window.confirm(question)) { event.preventDefault(); return; }
    if (form.querySelector('input[name="confirmed"]')) return;
    var mark = document.createElement('input');
    mark.type = 'hidden'; mark.name = 'confirmed'; mark.value = '1';
    form.appendChild(mark);
  });
  function setUpSelection() {
    var form = document.querySelector('form[data-selection]');
    if (!form) return function () {};
    var all = document.querySelector('input.select-all');
    var count = form.querySelector('.selected-count');
    function show() {
      var n = picked(form);
      if (count) count.textContent = n === 0 ? 'Tick jobs to act on them:' : n + ' job' + (n === 1 ? '' : 's') + ' selected:';
      if (all) all.checked = n > 0 && n === pickedBoxes(form).length;
    }
    if (all) {
      all.hidden = false;
      all.addEventListener('change', function () {
        var boxes = pickedBoxes(form);
        for (var i = 0; i < boxes.length; i++) boxes[i].checked = all.checked;
        show();
      });
    }
    document.addEventListener('change', function (event) {
      var t = event.target;
      if (t instanceof HTMLInputElement && t.name === 'id' && t.getAttribute('form') === form.getAttribute('id')) show();
    });
    show();
    return show;
  }
  var showSelection = setUpSelection();
  var summaryUrl = body.getAttribute('data-summary');
  var every = Number(body.getAttribute('data-refresh-ms'));
  if (summaryUrl && every > 0) {
    var showCounts = function (data) {
      var cells = document.querySelectorAll('[data-count]');
      for (var i = 0; i < cells.length; i++) {
        var key = cells[i].getAttribute('data-count').split('|');
        var counts = data.counts[key[0]];
        var n = counts ? counts[key[1]] : 0;
        var approx = counts && counts.approximate && counts.approximate.indexOf(key[1]) >= 0;
        cells[i].textContent = (approx ? '\\u2248' : '') + Number(n || 0).toLocaleString('en');
      }
      if (stamp) stamp.textContent = 'counts at ' + new Date(data.at).toLocaleTimeString();
    };
    setInterval(function () {
      if (idle()) return;
      fetch(summaryUrl, { credentials: 'same-origin', headers: { accept: 'application/json' } })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (data) { if (data) showCounts(data); })
        .catch(function () {});
    }, every);
  }
  var liveMs = Number(body.getAttribute('data-live-ms'));
  if (liveMs > 0) {
    // The page itself, without the one-time message of the action that led here.
    var here = new URL(location.href);
    here.searchParams.delete('flash');
    here.searchParams.delete('flash_sig');
    // Swaps each [data-live] region (the whole <main> when the page has none), keeping the ticked jobs ticked.
    var swap = function (page) {
      var regions = document.querySelectorAll('[data-live]');
      if (regions.length === 0) {
        var fresh = page.querySelector('main');
        var main = document.querySelector('main');
        if (!fresh || !main) return;
        main.innerHTML = fresh.innerHTML;
        localize(main);
        return;
      }
      var ticked = {};
      var boxes = document.querySelectorAll('input[type="checkbox"][name="id"]:checked');
      for (var i = 0; i < boxes.length; i++) ticked[boxes[i].value] = true;
      for (var j = 0; j < regions.length; j++) {
        var name = regions[j].getAttribute('data-live');
        var next = page.querySelector('[data-live="' + name + '"]');
        if (!next) continue;
        regions[j].innerHTML = next.innerHTML;
        localize(regions[j]);
      }
      var again = document.querySelectorAll('input[type="checkbox"][name="id"]');
      for (var k = 0; k < again.length; k++) if (ticked[again[k].value]) again[k].checked = true;
      showSelection();
    };
    var timer = setInterval(function () {
      if (idle()) return;
      fetch(here.toString(), { credentials: 'same-origin', headers: { accept: 'text/html' } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (text) {
          if (!text || paused) return;
          var page = new DOMParser().parseFromString(text, 'text/html');
          swap(page);
          if (stamp) stamp.textContent = 'updated ' + new Date().toLocaleTimeString();
          // Finished: the new page no longer asks to follow it.
          if (!page.body.hasAttribute('data-live-ms')) clearInterval(timer);
        })
        .catch(function () {});
    }, liveMs);
  }
})();
`;
