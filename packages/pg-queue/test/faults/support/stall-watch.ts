import type pg from 'pg';

interface HeldJob {
  worker: string;
  jobId: string;
  attempt: number;
}

/**
 * One sample: when it was answered, the jobs each worker held then (claimed, outcome not written) and had started,
 * and how many starts each worker had written by then.
 */
interface Sample {
  at: number;
  held: HeldJob[];
  startCounts: Map<string, number>;
}

/** A stall the watch recorded: how long no sample came back, and how many started jobs it recorded as held. */
export interface Stall {
  ms: number;
  held: number;
}

export interface StallWatchOptions {
  db: pg.Pool;
  /** The workers' lease: a stall of half of it is recorded (the heartbeat renews a lease every quarter of it here). */
  leaseMs: number;
  /** What each live worker had started so far, in order ([job id, attempt]), as its starts file says. */
  starts: () => Map<string, [string, number][]>;
  everyMs?: number;
}

/**
 * A fault nobody injected: the whole machine stalls (the CI machine under load once held every process of the suite,
 * PostgreSQL included, for over a second: a claim took 1.4 s and all four workers lost their 2 s leases in the same
 * second). Every lease then lapses as if each worker had been SIGSTOPped, the sweeper hands their jobs to others, and
 * running them again is the at-least-once promise kept, not a defect. The watch samples, every `everyMs`, the jobs
 * the workers hold and have started; when two samples lie at least half a lease apart (its timer and its query both
 * wait on the same stalled machine), it writes a fault ('STALL') for each worker with the jobs it held and had started
 * at the sample before, and the jobs it started between the two samples (in the stall), as a SIGSTOP would have been
 * written. Only those are excused: a run redone for any other reason, or started after the stall, is still reported
 * by the audit. The stall is also kept for the scenario's table.
 */
export class StallWatch {
  readonly stalls: Stall[] = [];
  private last: Sample | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private failing = false;
  private pending: Promise<void> = Promise.resolve();

  constructor(private readonly options: StallWatchOptions) {}

  start(): void {
    const tick = () => {
      if (this.stopped) return;
      this.pending = this.sample()
        .then(
          () => {
            if (this.failing) console.warn('stall watch: samples answered again');
            this.failing = false;
          },
          (error: unknown) => {
            // Once per run of failures (the restart scenario stops the server for seconds).
            if (!this.failing) console.warn(`stall watch: sample failed (${(error as Error).message}); trying every ${this.every} ms`);
            this.failing = true;
          },
        )
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(tick, this.every);
        });
    };
    tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.pending;
  }

  private get every(): number {
    return this.options.everyMs ?? 100;
  }

  private async sample(): Promise<void> {
    const starts = this.options.starts(); // read before the query: a start written after it is not in this sample
    const { rows } = await this.options.db.query<{ worker: string; id: string }>(
      `SELECT locked_by AS worker, id::text FROM background_jobs WHERE status = 'processing' AND locked_by IS NOT NULL`,
    );
    const at = performance.now();
    const started = new Map([...starts].map(([worker, lines]) => [worker, new Map(lines)]));
    const held = rows.flatMap(({ worker, id }) => {
      const attempt = started.get(worker)?.get(id);
      return attempt === undefined ? [] : [{ worker, jobId: id, attempt }];
    });
    const before = this.last;
    this.last = { at, held, startCounts: new Map([...starts].map(([worker, lines]) => [worker, lines.length])) };
    if (!before || at - before.at < this.options.leaseMs / 2) return;
    // Read again: a start written while this sample's query was out (in the stall, too) is in the stall's window.
    const startedInStall = [...this.options.starts()].flatMap(([worker, lines]) =>
      lines.slice(before.startCounts.get(worker) ?? 0).map(([jobId, attempt]) => ({ worker, jobId, attempt })),
    );
    await this.record(at - before.at, [...before.held, ...startedInStall]);
  }

  private async record(ms: number, held: HeldJob[]): Promise<void> {
    this.stalls.push({ ms, held: held.length });
    console.warn(`stall watch: no sample for ${Math.round(ms)} ms (half the lease is ${this.options.leaseMs / 2}): ${held.length} job(s) held and started then, or started in it, are recorded as held at a fault`);
    const workers = [...new Set(held.map((h) => h.worker))];
    await this.options.db.query(
      `WITH fault AS (INSERT INTO fault_faults (worker, pid, signal) SELECT w, 0, 'STALL' FROM unnest($1::text[]) AS w)
       INSERT INTO fault_held (worker, job_id, attempt) SELECT * FROM unnest($2::text[], $3::int8[], $4::int[])`,
      [workers, held.map((h) => h.worker), held.map((h) => h.jobId), held.map((h) => h.attempt)],
    );
  }
}
