import { Injectable } from '@nestjs/common';
import { spawn } from 'node:child_process';
import { describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { useTestApp, waitFor } from './support/test-app.js';

// onConflict 'queue-after' under OS processes: ENQUEUERS processes hammer one key (pg_queue_enqueue_unique with
// on_conflict 'queue-after': the statement QueueService runs for it) while this process's worker runs the key's jobs
// (each a few ms, so that duplicates meet a running holder). Every call and every start and end go to tables, and the
// assertions read them: no two runs of the key at once, at most one successor waiting at any sample, every job run
// once with a payload one of its calls gave it, and the last enqueue's payload run last.

const ENQUEUERS = 4;
const CALLS = 60;
let db: pg.Pool;

@Injectable()
class Handlers {
  @JobHandler('qa-proc', { concurrency: 4, prefetch: 2, maxAttempts: 1 })
  async run(job: Job<{ p: number; n: number }>) {
    await db.query(`INSERT INTO qa_runs (job_id, p, n, event) VALUES ($1, $2, $3, 'start')`, [job.id, job.payload.p, job.payload.n]);
    await new Promise((r) => setTimeout(r, 5 + Math.random() * 10));
    await db.query(`INSERT INTO qa_runs (job_id, p, n, event) VALUES ($1, $2, $3, 'end')`, [job.id, job.payload.p, job.payload.n]);
  }
}

/** One enqueuing process: CALLS calls of the key, each recorded with what it returned. */
const ENQUEUER = `
import pg from 'pg';
const [url, p, calls] = process.argv.slice(1);
const client = new pg.Client({ connectionString: url });
await client.connect();
for (let n = 0; n < Number(calls); n++) {
  const { rows } = await client.query("SELECT id, duplicate, replaced FROM pg_queue_enqueue_unique('qa-proc', $1::jsonb, unique_key => 'hot', on_conflict => 'queue-after')", [JSON.stringify({ p: Number(p), n })]);
  await client.query('INSERT INTO qa_calls (p, n, job_id, duplicate, replaced) VALUES ($1, $2, $3, $4, $5)', [Number(p), n, rows[0].id, rows[0].duplicate, rows[0].replaced]);
  if (n % 7 === 0) await new Promise((r) => setTimeout(r, Math.random() * 5));
}
await client.end();
`;

function enqueuer(url: string, p: number): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', ENQUEUER, url, String(p), String(CALLS)], { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('exit', (code) => resolve(code));
  });
}

describe("onConflict 'queue-after' with enqueuing processes", () => {
  const ctx = useTestApp('queue_after_proc', { providers: [Handlers], queue: { maintenance: { enabled: false } } }, async (pool) => {
    db = pool;
    await pool.query(`CREATE TABLE qa_runs (seq bigserial PRIMARY KEY, job_id bigint NOT NULL, p int NOT NULL, n int NOT NULL, event text NOT NULL)`);
    await pool.query(`CREATE TABLE qa_calls (seq bigserial PRIMARY KEY, p int NOT NULL, n int NOT NULL, job_id bigint NOT NULL, duplicate boolean, replaced boolean)`);
  });

  it('never two runs of the key at once, one successor at most, every job once, the last payload last', async () => {
    const samples: number[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'qa-proc' AND unique_key = 'hot' AND status = 'blocked'`);
        samples.push(rows[0].n);
        await new Promise((r) => setTimeout(r, 3));
      }
    })();
    const codes = await Promise.all(Array.from({ length: ENQUEUERS }, (_, p) => enqueuer(ctx.url, p)));
    expect(codes).toEqual(Array(ENQUEUERS).fill(0));
    // The last enqueue of all, while jobs of the key may still run: its payload is the last to run.
    const last = await ctx.app.get(QueueService).enqueueUnique('qa-proc', { p: 99, n: 0 }, { uniqueKey: 'hot', onConflict: 'queue-after' });
    await waitFor('every job of the key finished', async () => {
      const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM background_jobs WHERE queue_name = 'qa-proc' AND status IN ('queued', 'processing', 'blocked')`);
      return rows[0].n === 0;
    }, 60_000);
    sampling = false;
    await sampler;

    expect(Math.max(...samples)).toBeLessThanOrEqual(1);
    // The hammering met running holders: successors were made (blocked rows seen, several jobs of the key).
    expect(samples).toContain(1);
    const runs = (await db.query<{ job_id: string; p: number; n: number; event: string }>(`SELECT job_id::text, p, n, event FROM qa_runs ORDER BY seq`)).rows;
    // Never two runs of the key at once (this process's starts and ends, in the order the handlers wrote them).
    let open = 0;
    for (const r of runs) {
      open += r.event === 'start' ? 1 : -1;
      expect(open).toBeLessThanOrEqual(1);
    }
    const starts = runs.filter((r) => r.event === 'start');
    // Every job of the key ran once, and completed.
    const jobs = (await db.query<{ id: string; status: string }>(`SELECT id::text, status::text FROM background_jobs WHERE queue_name = 'qa-proc' ORDER BY id`)).rows;
    expect(jobs.every((j) => j.status === 'completed')).toBe(true);
    expect(jobs.length).toBeGreaterThan(3);
    expect(starts.map((s) => s.job_id).sort()).toEqual(jobs.map((j) => j.id).sort());
    // Every call named a job that exists; each job ran with the payload of one of the calls that named it.
    const calls = (await db.query<{ p: number; n: number; job_id: string }>(`SELECT p, n, job_id::text FROM qa_calls`)).rows;
    expect(calls.length).toBe(ENQUEUERS * CALLS);
    const ids = new Set(jobs.map((j) => j.id));
    for (const c of calls) expect(ids.has(c.job_id)).toBe(true);
    for (const s of starts) {
      if (s.p === 99) continue;
      expect(calls.some((c) => c.job_id === s.job_id && c.p === s.p && c.n === s.n)).toBe(true);
    }
    // A process's calls that named one job gave it payloads in order: the job ran with that process's last one or a
    // later process's (never an older payload of the same process once a newer one reached the job).
    for (const s of starts) {
      const mine = calls.filter((c) => c.job_id === s.job_id && c.p === s.p);
      if (mine.length > 0) expect(s.n).toBe(Math.max(...mine.map((c) => c.n)));
    }
    // The last enqueue ran last, with its payload.
    expect(starts.at(-1)).toEqual({ job_id: last.id, p: 99, n: 0, event: 'start' });
    expect((await db.query(`SELECT count(*)::int AS n FROM background_job_successors`)).rows).toEqual([{ n: 0 }]);
  }, 120_000);
});
