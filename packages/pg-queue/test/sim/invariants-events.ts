// The simulation's invariants for the event stream (issue 43): read from the tables (background_job_events, the jobs'
// rows) and from what the run's consumer received (SimEventConsumer below), as in invariants.ts.
import type pg from 'pg';
import { compareEventIds, type QueueEvent, type QueueService } from '../../src/index.js';
import type { Violation } from './invariants.js';

/**
 * The run's consumer: reads queue.events() from the start of the run, stops after `restartAfter` events (a consumer
 * restart) and resumes after the last id it saw; `finish()` waits until it has every event the table holds (the
 * processes have stopped), at most 30 s, then stops it.
 */
export class SimEventConsumer {
  readonly seen: QueueEvent[] = [];
  private readonly stop = new AbortController();
  private readonly running: Promise<void>;
  restarts = 0;

  constructor(private readonly queue: QueueService, private readonly restartAfter: number) {
    this.running = this.run();
  }

  private async run(): Promise<void> {
    let after = '0-0';
    while (!this.stop.signal.aborted) {
      const life = this.seen.length;
      for await (const e of this.queue.events({ after, pageSize: 50, pollIntervalMs: 200, signal: this.stop.signal })) {
        this.seen.push(e);
        after = e.id;
        if (this.restarts === 0 && this.seen.length - life >= this.restartAfter) break;
      }
      if (!this.stop.signal.aborted) this.restarts += 1;
    }
  }

  /** Stops it at once (a run that failed). */
  async close(): Promise<void> {
    this.stop.abort();
    await this.running;
  }

  async finish(db: pg.Pool): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const { n } = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_job_events`)).rows[0];
      if (this.seen.length >= n || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    this.stop.abort();
    await this.running;
  }
}

/** The terminal event a final status must end with. */
const LAST_EVENT: Record<string, string> = { completed: 'completed', failed: 'dead', cancelled: 'cancelled' };

/**
 * - The consumer received ids strictly increasing, each event the table holds exactly once (none skipped across its
 *   restart, none twice), and nothing else.
 * - Only the recording queues have events.
 * - Every job of a recording queue enqueued after it started recording has `enqueued` first; one that ended
 *   completed, failed or cancelled has the matching terminal event last (`completed`, `dead`, `cancelled`);
 *   every `started` is followed by the end of that run (or is the last event of a running job: none after the drain).
 */
export async function eventsMatchRows(db: pg.Pool, consumer: SimEventConsumer, recording: readonly string[]): Promise<Violation[]> {
  const violations: Violation[] = [];
  const seen = consumer.seen;
  for (let i = 1; i < seen.length; i++) {
    if (compareEventIds(seen[i - 1].id, seen[i].id) >= 0) {
      violations.push({ invariant: 'events.ids-increase', jobIds: [seen[i].jobId ?? ''].filter(Boolean), detail: `event ${seen[i].id} came after ${seen[i - 1].id}` });
      break;
    }
  }
  const { rows: table } = await db.query<{ key: string; queue_name: string; job_id: string | null }>(
    `SELECT tx::text || '-' || id AS key, queue_name, job_id::text FROM background_job_events ORDER BY tx, id`,
  );
  const got = new Map<string, number>();
  for (const e of seen) got.set(e.id, (got.get(e.id) ?? 0) + 1);
  const missed = table.filter((r) => !got.has(r.key));
  const twice = [...got].filter(([, n]) => n > 1).map(([k]) => k);
  const extra = [...got.keys()].filter((k) => !table.some((r) => r.key === k));
  if (missed.length || twice.length || extra.length) {
    violations.push({
      invariant: 'events.consumer-got-each-once',
      jobIds: missed.slice(0, 4).map((r) => r.job_id ?? ''),
      detail: `${missed.length} missed (${missed.slice(0, 5).map((r) => r.key).join(', ')}), ${twice.length} twice, ${extra.length} not in the table; ${consumer.restarts} restart(s), ${seen.length} received of ${table.length}`,
    });
  }
  const strangers = table.filter((r) => !recording.includes(r.queue_name));
  if (strangers.length) {
    violations.push({ invariant: 'events.only-recording-queues', jobIds: strangers.slice(0, 4).map((r) => r.job_id ?? ''), detail: `${strangers.length} event(s) of ${[...new Set(strangers.map((r) => r.queue_name))].join(', ')}` });
  }
  const { rows: jobs } = await db.query<{ id: string; status: string; types: string[] }>(
    `SELECT j.id::text, j.status::text, array_agg(e.type ORDER BY e.tx, e.id) AS types
     FROM background_jobs_all AS j JOIN background_job_events AS e ON e.job_id = j.id
     WHERE j.queue_name = ANY($1::text[]) GROUP BY j.id, j.status`,
    [recording],
  );
  for (const job of jobs) {
    const want = LAST_EVENT[job.status];
    if (job.types[0] !== 'enqueued') {
      violations.push({ invariant: 'events.enqueued-first', jobIds: [job.id], detail: `events ${job.types.join(' ')}` });
    }
    if (want && job.types.at(-1) !== want) {
      violations.push({ invariant: 'events.final-state-recorded', jobIds: [job.id], detail: `row ${job.status}, events ${job.types.join(' ')}` });
    }
  }
  return violations;
}
