import { describe, expect, it } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { dashboardBasicAuth } from '../../src/dashboard/dashboard-auth.js';
import { CSRF_COOKIE, DashboardCsrf } from '../../src/dashboard/dashboard-csrf.js';
import { mountBase } from '../../src/dashboard/dashboard-http.js';
import { resolveDashboardOptions } from '../../src/dashboard/resolve-dashboard-options.js';
import { html, SafeHtml } from '../../src/dashboard/views/html.js';
import { throughputChart, type MinuteBucket } from '../../src/dashboard/views/chart.js';
import { bulkQuestion, flowQuestion, jobQuestion, queueQuestion, scheduleQuestion, selectedQuestion } from '../../src/dashboard/views/confirm-questions.js';
import { flowGraph, layersOf, waitingText, type FlowDrawing } from '../../src/dashboard/views/flow-graph.js';
import { flowView } from '../../src/dashboard/views/flow.view.js';
import { jobView, progressBar } from '../../src/dashboard/views/job.view.js';
import { formatRelative, formatSpan } from '../../src/dashboard/views/format.js';
import { jobsView, listedStatus } from '../../src/dashboard/views/jobs.view.js';
import type { FlowJobRow } from '../../src/store/dashboard.store.js';
import type { PageContext } from '../../src/dashboard/views/layout.js';

// The dashboard's pure parts: escaping, CSRF tokens, basic auth, options. Everything that touches SQL or
// HTTP is in ../dashboard.spec.ts (a real browser, a real database).

const ctx: PageContext = { base: '/q', here: '/q/jobs/1', canAct: true, user: 'ops', access: 'full', csrfToken: 'tok', refreshMs: 0, hidePayloads: false, flash: null, databases: [] };
const req = (headers: Record<string, string>, body?: Record<string, string>, url = '/q/') => ({ headers, body, url });

describe('views escape what the data holds', () => {
  it('html`` escapes every interpolation but SafeHtml, and renders arrays, null and false', () => {
    const evil = `<script>alert("x")</script>' onmouseover='x' &amp;`;
    expect(html`<p title="${evil}">${evil}</p>`.value).toBe(
      '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; onmouseover=&#39;x&#39; &amp;amp;">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; onmouseover=&#39;x&#39; &amp;amp;</p>',
    );
    expect(html`${[html`<b>${'<'}</b>`, null, false, undefined, 0]}`.value).toBe('<b>&lt;</b>0');
    expect(html`${new SafeHtml('<i>ok</i>')}`.value).toBe('<i>ok</i>');
  });

  it('a job whose payload, error and queue carry markup renders it as text', () => {
    const page = jobView(ctx, { id: '1', queue_name: 'q<x>', status: 'failed', payload: { html: '</pre><script>1</script>' }, last_error: 'Error: <img src=x onerror=alert(1)>', attempts: 1, max_attempts: 1, priority: 0, created_at: '2026-11-30T10:00:00Z' }, new Date());
    expect(page).not.toMatch(/<script>1|<img src=x/);
    expect(page).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(page).toContain('&lt;/pre&gt;&lt;script&gt;1&lt;/script&gt;');
    expect(page).toContain('Retry');
    expect(jobView({ ...ctx, canAct: false, hidePayloads: true }, { id: '1', queue_name: 'q', status: 'failed', payload: { card: '4111' } }, new Date())).not.toMatch(/4111|<button|<form/);
  });
});

describe('the throughput chart', () => {
  const minutes = (counts: [number, number][]): MinuteBucket[] => counts.map(([completed, failed]) => ({ completed, failed }));

  it('draws the failure rate only through minutes with jobs: the line breaks at a minute without any, a lone minute is a dot', () => {
    // 60 minutes: jobs in minutes 10 and 11, none in 12 to 29, jobs in 30, none after.
    const buckets = minutes(Array.from({ length: 60 }, (_, i): [number, number] => (i === 10 ? [3, 1] : i === 11 ? [2, 2] : i === 30 ? [0, 4] : [0, 0])));
    const svg = throughputChart('emails', buckets).value;
    const lines = [...svg.matchAll(/<polyline class="rate" points="([^"]*)"/g)].map((m) => m[1].split(' ').length);
    expect(lines).toEqual([2]); // minutes 10 and 11 only: nothing drawn across the empty minutes to 30
    expect([...svg.matchAll(/<circle class="rate"/g)]).toHaveLength(1); // minute 30, alone
    expect(svg).toContain('peak 4/min');
  });

  it("has axes: jobs per minute up to the scale's top, the failure rate from 0 to 100 %, and the hour from 60 min ago to now", () => {
    const html = throughputChart('emails', minutes(Array.from({ length: 60 }, (_, i): [number, number] => (i === 59 ? [7, 1] : [0, 0])))).value;
    const axis = (cls: string) => [...html.matchAll(new RegExp(`<div class="${cls}"[^>]*>(.*?)</div>`, 'g'))].map((m) => [...m[1].matchAll(/<span>([^<]*)<\/span>/g)].map((x) => x[1]));
    expect(axis('y-axis')).toEqual([['8/min', '0']]);
    expect(axis('y-axis rate-axis')).toEqual([['100 %', '0 %']]);
    expect(axis('x-axis')).toEqual([['60 min ago', '30 min ago', 'now']]);
  });

  it('says "no jobs" for a queue without finished jobs, with no rate drawn and no peak of 1', () => {
    const svg = throughputChart('idle', minutes(Array.from({ length: 60 }, (): [number, number] => [0, 0]))).value;
    expect(svg).not.toMatch(/peak|class="rate"/);
    expect(svg).toContain('0 completed · 0 failed · failure rate — · no jobs · 60 min');
  });
});

describe('lists: relative times, durations, due and scheduled, progress', () => {
  const now = '2026-12-03T10:00:00.000Z';
  it('says a time from the database\'s now in the largest unit that fits', () => {
    expect(formatRelative('2026-12-03T10:04:30Z', now)).toBe('in 4 min');
    expect(formatRelative('2026-12-03T09:59:48Z', now)).toBe('12 s ago');
    expect(formatRelative('2026-11-30T09:00:00Z', now)).toBe('3 d ago');
    expect(formatRelative('2026-12-03T10:00:00.400Z', now)).toBe('now');
    expect([formatSpan(850), formatSpan(12_400), formatSpan(185_000), formatSpan(7_500_000), formatSpan(277_200_000), formatSpan(60_000)]).toEqual(['850 ms', '12.4 s', '3 min 5 s', '2 h 5 min', '3 d 5 h', '1 min']);
  });

  it('a queued job is due once its run_at has come, scheduled before', () => {
    expect(listedStatus({ status: 'queued', run_at: '2026-12-03T10:00:00Z', now })).toBe('due');
    expect(listedStatus({ status: 'queued', run_at: '2026-12-03T10:00:01Z', now })).toBe('scheduled');
    expect(listedStatus({ status: 'failed', run_at: '2026-12-03T11:00:00Z', now })).toBe('failed');
  });

  it('draws progress as a bar when it is a percentage, { current, total } or { done, of }, and not otherwise', () => {
    const bar = (v: unknown) => {
      const out = progressBar(v);
      return out === null ? null : (out as { value: string }).value.replace(/^.*<progress max="([^"]*)" value="([^"]*)".*<span>([^<]*)<\/span>.*$/s, '$1 $2 $3');
    };
    expect(bar(42)).toBe('100 42 42 %');
    expect(bar({ current: 3, total: 12 })).toBe('12 3 3 of 12 (25 %)');
    expect(bar({ done: 5, of: 4 })).toBe('4 4 5 of 4 (100 %)');
    expect([bar('half'), bar({ step: 'upload' }), bar({ current: 1, total: 0 }), bar(null), bar(Number.NaN)]).toEqual([null, null, null, null, null]);
  });

  it('offers no payload and error search with hidePayloads (its matches would tell what hidden payloads hold), and no selection to a read-only user', () => {
    const row = { id: '5', queue_name: 'q', status: 'failed' as const, attempts: 1, max_attempts: 1, priority: 0, run_at: new Date(now), created_at: new Date(now), finished_at: new Date(now), locked_at: null, now: new Date(now), unique_key: null, last_error: 'x', payload_preview: null };
    const data = { queue: 'q', status: null, search: null, text: null, order: 'newest' as const, rows: [row], nextBefore: null, nextAfter: null, scanned: null, stoppedEarly: false, first: true };
    expect(jobsView(ctx, data)).toContain('name="text"');
    expect(jobsView({ ...ctx, hidePayloads: true }, data)).not.toContain('name="text"');
    expect(jobsView(ctx, data)).toContain('form="selected"');
    expect(jobsView({ ...ctx, canAct: false }, data)).not.toMatch(/form="selected"|type="checkbox"/);
  });

  it('the job page leaves out the queue\'s own bookkeeping columns and keeps a column it does not know', () => {
    const page = jobView(ctx, { id: '1', queue_name: 'q', status: 'completed', payload: {}, fence_token: '7', awaited: true, limited: false, tenant_tag: 'acme', attempts: 1, max_attempts: 1, priority: 0 }, new Date());
    expect(page).not.toMatch(/fence_token|awaited|limited/);
    expect(page).toContain('Other columns');
    expect(page).toContain('tenant_tag');
  });
});

describe('confirmation questions', () => {
  it('are sentences that name the job, the jobs, the queue or the schedule', () => {
    expect(jobQuestion('delete', '186')).toBe('Delete job 186? This cannot be undone.');
    expect(jobQuestion('retry', '186')).toBe('Retry job 186 with a fresh set of attempts?');
    expect(jobQuestion('cancel', '186')).toBe('Cancel job 186?');
    expect(jobQuestion('run-now', '186')).toBe('Run job 186 now instead of at its scheduled time?');
    expect(bulkQuestion('cancel', 'emails', null)).toBe('Cancel every queued or running job in queue emails? Queued ones never run; running ones are told to stop.');
    expect(bulkQuestion('delete', null, 'failed')).toBe('Delete every failed job in every queue? Running ones are kept. This cannot be undone.');
    expect(bulkQuestion('delete', 'emails', null)).toBe('Delete every queued, completed, failed or cancelled job in queue emails? Running ones are kept. This cannot be undone.');
    expect(bulkQuestion('retry', 'emails', null)).toBe('Retry every failed or cancelled job in queue emails, each with a fresh set of attempts?');
    expect(bulkQuestion('run-now', 'reports', null)).toBe('Run every scheduled job in queue reports now, instead of at its scheduled time?');
    expect(bulkQuestion('cancel', null, 'processing')).toBe('Cancel every running job in every queue? Queued ones never run; running ones are told to stop.');
    expect(bulkQuestion('cancel', 'emails', 'due')).toBe('Cancel every due job in queue emails? Queued ones never run; running ones are told to stop.');
    expect(selectedQuestion('retry', ['12', '13', '14'])).toBe('Retry jobs 12, 13 and 14, each with a fresh set of attempts? Only failed and cancelled ones change.');
    expect(selectedQuestion('delete', ['12'])).toBe('Delete job 12? Running ones are kept. This cannot be undone.');
    expect(selectedQuestion('cancel', null)).toBe('Cancel {jobs}? Queued ones never run; running ones are told to stop; finished ones stay as they are.');
    expect(queueQuestion('pause', 'emails')).toBe('Pause queue emails? Running jobs finish; no new job starts.');
    expect(scheduleQuestion('resume', 'nightly')).toBe('Resume schedule nightly from its next fire?');
    expect(flowQuestion('12', 'checkout')).toBe('Cancel flow 12 (checkout)? Its queued and blocked jobs never run, its running ones are told to abort, and no compensation runs.');
  });
});

describe('the job page', () => {
  const row = { id: '186', queue_name: 'emails', payload: {}, attempts: 0, max_attempts: 5, priority: 0, created_at: '2026-11-30T10:00:00Z', last_error: 'Error: mailbox full' };

  it('shows a retried job without a lease owner, and its kept error as the previous attempt’s', () => {
    const page = jobView(ctx, { ...row, status: 'queued', locked_by: null }, new Date());
    expect(page).toContain('<dt>Last run by</dt><dd data-field="locked_by">—</dd>');
    expect(page).not.toContain('Lease owner');
    expect(page).toContain('<h2>Previous attempt’s error</h2>');
  });

  it('shows a running job’s lease owner, and a dead letter’s error as its last', () => {
    expect(jobView(ctx, { ...row, status: 'processing', locked_by: 'host-1:42', lease_expires_at: '2026-11-30T10:01:00Z' }, new Date())).toContain(
      '<dt>Lease owner</dt><dd data-field="locked_by"><a href="/q/instances#instance-host-1%3A42">host-1:42</a> (lease until',
    );
    expect(jobView(ctx, { ...row, status: 'failed', locked_by: 'host-1:42' }, new Date())).toContain('<h2>Last error</h2>');
  });
});

describe('CSRF tokens', () => {
  const secret = Buffer.from('s'.repeat(32));
  const csrf = new DashboardCsrf(secret);
  const nonce = 'n'.repeat(32);
  const good = createHmac('sha256', secret).update(nonce).digest('base64url');
  const cookie = `a=b; ${CSRF_COOKIE}=${nonce}`;

  it('accepts the token of the cookie\'s nonce, in the form or the header', () => {
    expect(csrf.token(nonce)).toBe(good);
    expect(csrf.verify(req({ cookie }, { _csrf: good }))).toBe(true);
    expect(csrf.verify(req({ cookie, 'x-csrf-token': good }))).toBe(true);
  });

  it('refuses a missing or wrong token, a missing cookie, another nonce\'s token, and a cross-site request', () => {
    expect(csrf.verify(req({ cookie }, {}))).toBe(false);
    expect(csrf.verify(req({ cookie }, { _csrf: good.slice(1) + 'A' }))).toBe(false);
    expect(csrf.verify(req({}, { _csrf: good }))).toBe(false);
    expect(csrf.verify(req({ cookie: `${CSRF_COOKIE}=${'m'.repeat(32)}` }, { _csrf: good }))).toBe(false);
    expect(csrf.verify(req({ cookie, 'sec-fetch-site': 'cross-site' }, { _csrf: good }))).toBe(false);
    expect(new DashboardCsrf(Buffer.from('t'.repeat(32))).verify(req({ cookie }, { _csrf: good }))).toBe(false);
  });

  it('gives a browser without a nonce one, in an HttpOnly SameSite=Strict cookie scoped to the dashboard', () => {
    const { nonce: fresh, setCookie } = csrf.nonceFor(req({}), '/admin/q');
    expect(setCookie).toBe(`${CSRF_COOKIE}=${fresh}; Path=/admin/q; HttpOnly; SameSite=Strict`);
    expect(csrf.nonceFor(req({ 'x-forwarded-proto': 'https' }), '/q').setCookie).toMatch(/; Secure$/);
    expect(csrf.nonceFor(req({ cookie }), '/q')).toEqual({ nonce, setCookie: null });
  });
});

describe('dashboardBasicAuth', () => {
  const auth = dashboardBasicAuth({ users: [{ name: 'ops', password: 'ops-password' }, { name: 'help', password: 'help-password', access: 'read-only' }] });
  const basic = (user: string, password: string) => ({ headers: { authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` } });

  it('answers each user\'s access, and a challenge for no or wrong credentials', () => {
    expect(auth(basic('ops', 'ops-password'))).toEqual({ access: 'full', user: 'ops' });
    expect(auth(basic('help', 'help-password'))).toEqual({ access: 'read-only', user: 'help' });
    const denied = { access: 'denied', challenge: 'Basic realm="pg-queue dashboard", charset="UTF-8"' };
    expect(auth(basic('ops', 'help-password'))).toEqual(denied);
    expect(auth({ headers: {} })).toEqual(denied);
    expect(auth({ headers: { authorization: 'Bearer x' } })).toEqual(denied);
  });

  it('refuses a short password or no users at boot', () => {
    expect(() => dashboardBasicAuth({ users: [{ name: 'ops', password: 'short' }] })).toThrow(/at least 8 characters/);
    expect(() => dashboardBasicAuth({ users: [] })).toThrow(/at least one user/);
  });
});

describe('options', () => {
  const auth = () => 'full' as const;
  it('names the bad option', () => {
    expect(() => resolveDashboardOptions({ path: '', auth })).toThrow(/option "path" must be a non-empty URL path/);
    expect(() => resolveDashboardOptions({ path: 'a b', auth })).toThrow(/option "path"/);
    expect(() => resolveDashboardOptions({ path: 'q', auth, refreshMs: 10 })).toThrow(/option "refreshMs" must be an integer from 1000 to 3600000 \(or 0: off\)/);
    expect(() => resolveDashboardOptions({ path: 'q', auth, csrfSecret: 'short' })).toThrow(/option "csrfSecret" must be a string of at least 32 characters, got "\(hidden\)"/);
    expect(() => resolveDashboardOptions({ path: 'q', auth, hidePayload: true } as never)).toThrow(/unknown option "hidePayload"; known options: path, auth/);
    expect(() => resolveDashboardOptions({ path: 'q', auth: { guard: 'x' } as never })).toThrow(/option "auth" must be a function/);
  });

  it('defaults, and the path without its slashes', () => {
    const resolved = resolveDashboardOptions({ path: '/admin/queues/', auth });
    expect(resolved).toMatchObject({ path: 'admin/queues', readOnly: false, hidePayloads: false, refreshMs: 5_000, statementTimeoutMs: 3_000, pageSize: 50, public: false });
    expect(resolved.csrfSecret).toHaveLength(32);
  });

  it('links follow the path the browser used (a global prefix included)', () => {
    expect(mountBase(req({}, undefined, '/api/admin/q/jobs/12?x=1'), '/jobs/12')).toBe('/api/admin/q');
    expect(mountBase(req({}, undefined, '/admin/q/'), '')).toBe('/admin/q');
    expect(mountBase(req({}, undefined, '/admin/q/queues/a%3Ab/pause'), '/queues/a:b/pause')).toBe('/admin/q');
  });
});

describe('flows: the DAG drawing and the flow page', () => {
  const job = (id: string, ref: string | null, extra: Partial<FlowJobRow> = {}): FlowJobRow => ({
    id, ref, queue_name: 'q', status: 'queued', attempts: 0, max_attempts: 5, compensates: null, run_at: new Date('2026-11-30T10:00:00Z'),
    finished_at: null, last_error: null, waiting_for: null, waiting: null, ...extra,
  });
  const edge = (parent: string, child: string) => ({ parent, child, on_failure: 'fail' as const, done: false });
  const drawing = (jobs: FlowJobRow[], edges: ReturnType<typeof edge>[], more: Partial<FlowDrawing> = {}): FlowDrawing => ({ jobs, edges, total: jobs.length, capped: false, edgesCapped: false, ...more });

  it('puts each job one layer past its deepest drawn parent, whatever the ids\' order', () => {
    // A diamond with a shortcut (1 -> 4), ids not in dependency order (5 is a parent of 2).
    const layers = layersOf(['1', '2', '3', '4', '5'], [edge('1', '3'), edge('1', '4'), edge('3', '4'), edge('5', '2'), edge('4', '2')]);
    expect(Object.fromEntries(layers)).toEqual({ '1': 0, '3': 1, '4': 2, '2': 3, '5': 0 });
    // Edges to jobs that are not drawn are left out: a job whose parents are not drawn starts a layer 0.
    expect(Object.fromEntries(layersOf(['7', '8'], [edge('6', '7'), edge('7', '8')]))).toEqual({ '7': 0, '8': 1 });
  });

  it('says what a blocked job waits for, with how many more than it lists', () => {
    expect(waitingText(['a', 'b'], 2)).toBe('a, b');
    expect(waitingText(['a', 'b'], 1000)).toBe('a, b and 998 more');
    expect(waitingText([], 0)).toBe('no parent (all are done: the sweeper unblocks it)');
  });

  it('escapes refs, queues and statuses in nodes, titles and edges, and cuts long labels', () => {
    const evil = '<script>alert(1)</script>';
    const svg = flowGraph('/q', drawing([job('1', evil, { queue_name: `q"><img src=x>` }), job('2', 'child', { status: 'blocked', waiting_for: [evil], waiting: 1 })], [edge('1', '2')])).value;
    expect(svg).not.toMatch(/<script>|<img src=x/);
    expect(svg).toContain('<title>child (job 2) · queue q · blocked · waiting for &lt;script&gt;alert(1)&lt;/script&gt;</title>');
    expect(svg).toContain('>&lt;script&gt;alert(1)&lt;/s…</text>');
    expect(svg).toContain('<title>&lt;script&gt;alert(1)&lt;/script&gt; → child (on failure: fail; open)</title>');
    expect(svg).toContain('q&quot;&gt;&lt;img src=x&gt; · queued</text>');
  });

  it('marks compensation jobs, says how many jobs are not drawn, and says when edges were capped', () => {
    const svg = flowGraph('/q', drawing([job('1', 'pay', { status: 'completed' }), job('3', 'compensate:pay', { compensates: '1' })], [], { total: 10_000, capped: true, edgesCapped: true })).value;
    expect(svg).toContain('<g class="node st-queued compensation"><title>compensate:pay (job 3) · queue q · queued · compensates pay</title>');
    expect(svg).toContain('The first 2 jobs (by id) are drawn; over 9,998 more are in the table below.');
    expect(svg).toContain('Only the first 0 edges between the drawn jobs are drawn.');
    expect(flowGraph('/q', drawing([], [])).value).toContain('no jobs left');
  });

  it('the flow page hides last errors with hidePayloads, and offers Cancel only on an unfinished flow to a full-access user', () => {
    const flow = { id: '9', name: 'n', status: 'failing' as const, reason: 'job 2 (b) failed', failed_job_id: '2', created_at: new Date(), updated_at: new Date(), finished_at: null, counts: { failed: 1 }, capped: false };
    const jobs = [job('2', 'b', { status: 'failed', last_error: 'Error: card 4111' })];
    const data = { flow, drawing: drawing(jobs, []), page: { rows: jobs, after: '0', nextAfter: null } };
    expect(flowView(ctx, data)).toContain('Error: card 4111');
    expect(flowView(ctx, data)).toContain('action="/q/flows/9/cancel"');
    expect(flowView({ ...ctx, hidePayloads: true }, data)).not.toContain('4111');
    expect(flowView({ ...ctx, canAct: false }, data)).not.toMatch(/<form method="post"|<button/);
    expect(flowView(ctx, { ...data, flow: { ...flow, status: 'failed', finished_at: new Date() } })).not.toContain('/cancel"');
  });

  it('the job page of a compensation job hides its compensation payload with hidePayloads', () => {
    const row = { id: '5', queue_name: 'q', status: 'completed', payload: {}, attempts: 1, max_attempts: 1, flow_id: '9', flow_ref: 'pay', compensate: { queue: 'undo', payload: { card: '4111' } } };
    const flow = { id: '9', name: null, status: 'running' as const, ref: 'pay', waiting_for: null, waiting: null };
    expect(jobView(ctx, row, new Date(), flow)).toContain('4111');
    expect(jobView(ctx, row, new Date(), flow)).toContain('<dd data-field="flow"><a href="/q/flows/9">flow 9</a>');
    expect(jobView({ ...ctx, hidePayloads: true }, row, new Date(), flow)).not.toContain('4111');
  });
});
