// The operator of the simulation: acts on live queues at the plan's moments through the host's QueueService, the
// `pg-queue` CLI (built with the workers, run as a user runs it) and SQL, as an operator does. Every action is
// written to sim_ops with the database clock when it was sent and answered, and the jobs it named.
import type pg from 'pg';
import type { QueueService } from '../../src/index.js';
import { addJobOf } from '../../src/dashboard/dashboard-add-job.js';
import { runCli } from '../support/run-cli.js';
import { sleep, type SimProcesses } from './faults.js';
import type { OperatorKind, SimPayload } from './generator.js';

export interface OperatorDeps {
  db: pg.Pool;
  url: string;
  queue: QueueService;
  processes: SimProcesses;
  /** The CLI's main.js in the worker build. */
  cli: string;
  workerSlots: string[];
  /** A pass of the history mover, run by the run's host (runs with partitioned history only). */
  moveHistory?: () => Promise<number>;
}

async function now(db: pg.Pool): Promise<string> {
  const { rows } = await db.query<{ at: string }>('SELECT clock_timestamp()::text AS at');
  return rows[0].at;
}

async function record(db: pg.Pool, op: string, t0: string, ids: string[], detail: unknown): Promise<void> {
  await db.query('INSERT INTO sim_ops (op, job_ids, detail, t0, t1) VALUES ($1, $2::int8[], $3, $4, clock_timestamp())', [op, ids, JSON.stringify(detail ?? null), t0]);
}

/** One job of `sql`'s rows, chosen by `pick` (0..1) from the rows in id order: the plan chooses, the moment decides the rows. */
async function pickJob(db: pg.Pool, sql: string, pick: number): Promise<string | undefined> {
  const { rows } = await db.query<{ id: string }>(`${sql} ORDER BY id LIMIT 500`);
  return rows.length ? rows[Math.floor(pick * rows.length)].id : undefined;
}

let nonce = 10_000_000;

/** The runtime schedule the operator edits (`schedule-edit`): made by run-sim.ts at 1 s, into queue `tick`. */
export const EDITED_SCHEDULE = { name: 'edited', queue: 'tick', every: 1_000, payload: { b: 'ok', ms: 1, n: 0, at: '{{fireAt}}' } };

export async function act(d: OperatorDeps, kind: OperatorKind, pick: number, holdMs: number): Promise<string> {
  const t0 = await now(d.db);
  switch (kind) {
    case 'bulk-cancel': {
      // docs/cli.md: "the workers start none of them".
      const args = ['jobs', 'cancel', '--status', 'queued', ...(pick < 0.7 ? ['--queue', 'sim'] : []), '--yes'];
      const r = await runCli(args, { DATABASE_URL: d.url, FORCE_COLOR: '0' }, undefined, d.cli);
      await record(d.db, kind, t0, [], { args, code: r.code, out: r.stdout.slice(-200) });
      return `bulk cancel: ${r.stdout.trim().split('\n').pop() ?? ''}`;
    }
    case 'cancel': {
      const id = await pickJob(d.db, `SELECT id::text FROM background_jobs WHERE status IN ('queued', 'processing', 'blocked')`, pick);
      if (!id) return 'cancel: nothing to cancel';
      const result = await d.queue.cancel(id);
      await record(d.db, kind, t0, [id], result);
      return `cancel ${id}: ${JSON.stringify(result)}`;
    }
    case 'retry': {
      // Failed jobs of every kind, flow jobs too (a job failed because its parent failed, issue 39 item 12).
      const id = await pickJob(d.db, `SELECT id::text FROM background_jobs WHERE status IN ('failed', 'cancelled')`, pick);
      if (!id) return 'retry: nothing to retry';
      const result = await d.queue.retry(id);
      await record(d.db, kind, t0, [id], result);
      return `retry ${id}: ${result}`;
    }
    case 'bulk-retry': {
      const args = ['jobs', 'retry', '--status', 'failed', '--queue', pick < 0.5 ? 'sim' : 'flow', '--yes'];
      const r = await runCli(args, { DATABASE_URL: d.url, FORCE_COLOR: '0' }, undefined, d.cli);
      await record(d.db, kind, t0, [], { args, code: r.code });
      return `bulk retry: code ${r.code}`;
    }
    case 'replace': {
      // Bursts of replaces of keys whose holder is live (queued, read ahead or running): "a running job is never
      // changed". Three rounds 50 ms apart, so that some land while a holder is between its start and its start mark.
      const answers: { id: string; key: string; answer: string }[] = [];
      for (let round = 0; round < 3; round++) {
        const { rows } = await d.db.query<{ key: string }>(
          `SELECT DISTINCT unique_key AS key FROM background_jobs WHERE unique_key IS NOT NULL AND status IN ('queued', 'processing') AND queue_name = 'sim' ORDER BY 1 LIMIT 20`,
        );
        const chosen = rows.slice(Math.floor(pick * rows.length)).concat(rows).slice(0, Math.min(rows.length, 8));
        const made = await Promise.all(
          chosen.map((r) => d.queue.enqueueUnique('sim', { b: 'ok', ms: 5, n: ++nonce, v: nonce } satisfies SimPayload, { uniqueKey: r.key, onConflict: 'replace' })),
        );
        made.forEach((a, i) => answers.push({ id: a.id, key: chosen[i].key, answer: a.replaced ? 'replaced' : a.duplicate ? 'duplicate' : 'inserted' }));
        await sleep(50);
      }
      if (!answers.length) return 'replace: no live key';
      await d.db.query(
        `INSERT INTO sim_enqueues (job_id, kind, committed, unique_key, on_conflict, answer, by_worker) SELECT id, 'replace', true, key, 'replace', answer, 'operator' FROM unnest($1::int8[], $2::text[], $3::text[]) AS u(id, key, answer)`,
        [answers.map((a) => a.id), answers.map((a) => a.key), answers.map((a) => a.answer)],
      );
      await record(d.db, kind, t0, answers.map((a) => a.id), answers);
      return `replace: ${answers.filter((a) => a.answer === 'replaced').length} of ${answers.length} replaced`;
    }
    case 'pause-resume': {
      const queue = pick < 0.5 ? 'sim' : pick < 0.7 ? 'flow' : pick < 0.85 ? 'prio' : 'fair';
      await d.queue.pause(queue);
      await record(d.db, 'pause', t0, [], { queue });
      await sleep(holdMs);
      const t1 = await now(d.db);
      await d.queue.resume(queue);
      await record(d.db, 'resume', t1, [], { queue });
      return `paused ${queue} for ${holdMs} ms`;
    }
    case 'prune': {
      const args = ['prune', '--completed-retention', '5s', '--failed-retention', pick < 0.5 ? 'never' : '5s', '--yes'];
      const r = await runCli(args, { DATABASE_URL: d.url, FORCE_COLOR: '0' }, undefined, d.cli);
      await record(d.db, kind, t0, [], { args, code: r.code });
      return `prune: code ${r.code}`;
    }
    case 'close': {
      const slot = d.workerSlots[Math.floor(pick * d.workerSlots.length)];
      const answer = await d.processes.close(slot);
      await record(d.db, kind, t0, [], { slot, answer });
      return `close ${slot}: ${answer ? `${answer.ms} ms` : 'skipped (busy)'}`;
    }
    case 'priority-probe': {
      // Issue 39 item 4: a paused queue, low-priority jobs then high ones, resume: each claim starts by priority.
      await d.queue.pause('prio');
      await record(d.db, 'pause', t0, [], { queue: 'prio' }); // pause.nothing-starts reads it, as a pause-resume's
      const low = Array.from({ length: 25 }, () => ({ queue: 'prio', payload: { b: 'ok', ms: 2, n: ++nonce } satisfies SimPayload, priority: 0 }));
      const high = Array.from({ length: 25 }, () => ({ queue: 'prio', payload: { b: 'ok', ms: 2, n: ++nonce } satisfies SimPayload, priority: 5 }));
      const ids = [...(await d.queue.enqueueMany(low)), ...(await d.queue.enqueueMany(high))];
      await d.db.query(`INSERT INTO sim_enqueues (job_id, kind, committed, by_worker) SELECT id, 'priority-probe', true, 'operator' FROM unnest($1::int8[]) AS id`, [ids]);
      await sleep(300);
      const t1 = await now(d.db);
      await d.queue.resume('prio');
      await record(d.db, 'resume', t1, [], { queue: 'prio' });
      await record(d.db, kind, t0, ids, null);
      return `priority probe: ${ids.length} jobs`;
    }
    case 'add-job': {
      // The dashboard's "Add a job" form (issue 44): its fields read by addJobOf, enqueued by DashboardService.addJob's
      // path (QueueService.enqueue, enqueueUnique with a key). invariants-forms.ts checks the row holds what it asked.
      const n = ++nonce;
      const form: Record<string, string> = { queue: 'sim', payload: JSON.stringify({ b: 'ok', ms: 3, n } satisfies SimPayload), priority: String(Math.round(pick * 10)), maxAttempts: String(2 + Math.floor(pick * 5)) };
      if (pick > 0.5) form.delaySeconds = '1';
      if (pick > 0.7) form.lifo = '1';
      const { queue, payload, options } = addJobOf({ body: form, headers: {} });
      const id = await d.queue.enqueue(queue, payload, options);
      await d.db.query(`INSERT INTO sim_enqueues (job_id, kind, committed, by_worker) VALUES ($1, 'add-job', true, 'operator')`, [id]);
      await record(d.db, kind, t0, [id], { form, n });
      return `add job ${id} (form ${JSON.stringify(form)})`;
    }
    case 'limits': {
      // Queue lim's limits at runtime (README, "Limits changed at runtime"): its global limit 1 to 4 or the decorator's,
      // and in a third of the changes each process's concurrency 1 or the decorator's. sim_queue_changes (a trigger)
      // keeps when each took effect in the row; the invariants read the limit in force there.
      const globalConcurrency = pick < 0.2 ? null : 1 + (Math.floor(pick * 1_000) % 4);
      const change = { globalConcurrency, ...(pick > 0.66 ? { concurrency: pick > 0.83 ? 1 : null } : {}) };
      const limits = await d.queue.setQueueLimits('lim', change);
      await record(d.db, kind, t0, [], { change, limits });
      return `limits of lim: ${JSON.stringify(change)}`;
    }
    case 'change': {
      // Up to 8 jobs of queue `sim` from the workers' front on: the change answers 'changed' only for a job not
      // started and not held; whatever it answered is in sim_ops, and the runs' payload invariant checks the rest.
      const { rows } = await d.db.query<{ id: string }>(
        `SELECT id::text FROM background_jobs WHERE queue_name = 'sim' AND status IN ('queued', 'processing', 'blocked') ORDER BY run_at, id LIMIT 8`,
      );
      const what = (['promote', 'priority', 'delay', 'payload'] as const)[Math.min(3, Math.floor(pick * 4))];
      const answers = await Promise.all(
        rows.map(({ id }) =>
          what === 'promote'
            ? d.queue.promote(id)
            : what === 'priority'
              ? d.queue.changePriority(id, Math.round(pick * 20) - 10)
              : what === 'delay'
                ? d.queue.changeDelay(id, holdMs)
                : d.queue.updatePayload(id, { b: 'ok', ms: 5, n: ++nonce, v: nonce } satisfies SimPayload),
        ),
      );
      await record(d.db, `change:${what}`, t0, rows.map((r) => r.id), answers);
      return `change (${what}): ${answers.filter((a) => a === 'changed').length} of ${answers.length} changed`;
    }
    case 'weights': {
      // Fair share weights stored at runtime (issue 42): every process's next fair claim reads them.
      const keys = ['f1', 'f2', 'f3', 'f4'];
      const weights = Object.fromEntries(keys.map((k, i) => [k, pick < 0.25 ? null : 1 + Math.floor(((pick * 1_000) / (i + 1)) % 5)]));
      await d.queue.setFairnessWeights('fair', weights);
      await record(d.db, kind, t0, [], weights);
      return `weights of fair: ${JSON.stringify(weights)}`;
    }
    case 'history-move': {
      // A pass of the mover at a random moment, beside the processes' own passes (generator.ts, addHistory).
      if (!d.moveHistory) return 'history-move: no history';
      const moved = await d.moveHistory();
      await record(d.db, kind, t0, [], { moved });
      return `history-move: ${moved} moved`;
    }
    case 'schedule-edit': {
      // The runtime schedule `edited` (run-sim.ts), edited as the dashboard's and the CLI's forms do (upsertSchedule),
      // paused and resumed, or fired now. invariants-schedule-edits.ts reads each from sim_ops.
      if (pick < 0.5) {
        const everyMs = [1_000, 1_500, 2_500][Math.floor(pick * 6)];
        await d.queue.upsertSchedule({ ...EDITED_SCHEDULE, every: everyMs });
        await record(d.db, 'schedule-interval', t0, [], { everyMs });
        return `schedule edited: every ${everyMs} ms`;
      }
      if (pick < 0.75) {
        await d.queue.pauseSchedule('edited');
        await record(d.db, 'schedule-pause', t0, [], null);
        await sleep(holdMs);
        const t1 = await now(d.db);
        await d.queue.resumeSchedule('edited');
        await record(d.db, 'schedule-resume', t1, [], null);
        return `schedule edited paused for ${holdMs} ms`;
      }
      const id = await d.queue.fireSchedule('edited');
      await record(d.db, 'schedule-fire-now', t0, id ? [id] : [], { id });
      return `schedule edited fired now: job ${id}`;
    }
    case 'lock-wait': {
      // Issue 39 item 5: an app transaction holds a unique key for longer than a lease while the process holding the
      // most running jobs calls enqueue() of that key more times than its queue pool has connections.
      const key = `lock-${++nonce}`;
      const client = await d.db.connect();
      // Checked out, it has no listener of the pool's: a restart of PostgreSQL during the hold must not throw here.
      let lost: Error | undefined;
      const onError = (error: Error) => (lost = error);
      client.on('error', onError);
      try {
        await client.query('BEGIN');
        await d.queue.enqueueUnique('sim', { b: 'ok', ms: 1, n: nonce } satisfies SimPayload, { uniqueKey: key, delayMs: 600_000, manager: client });
        const { rows } = await d.db.query<{ worker: string }>(
          `SELECT locked_by AS worker FROM background_jobs WHERE status = 'processing' AND NOT buffered AND locked_by IS NOT NULL GROUP BY 1 ORDER BY count(*) DESC LIMIT 1`,
        );
        const slot = rows[0]?.worker.split('.')[0] ?? d.workerSlots[0];
        const p = d.processes.slots.get(slot);
        const calls = (p?.plan.poolSize ?? 4) + 2;
        const waiting = d.processes.ask<string[]>(slot, { op: 'lock-wait', key, calls }).catch((e: Error) => [e.message]);
        const hold = (p?.plan.leaseMs ?? 2_000) * 2 + holdMs;
        await sleep(hold);
        await client.query('ROLLBACK');
        const answers = await waiting;
        await record(d.db, kind, t0, [], { slot, key, calls, hold, answers: answers.slice(0, 3) });
        return `lock wait on ${slot}: ${calls} enqueues waited ${hold} ms`;
      } finally {
        client.off('error', onError);
        client.release(lost);
      }
    }
  }
}
