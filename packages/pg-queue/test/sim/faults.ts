// The simulation's processes and the faults it injects into them. Each process slot of the plan ('e', 'w1', ...)
// gets a WorkerFleet of the fault suite (test/faults/support/fleet.ts) with that slot's options, so every SIGKILL
// and SIGSTOP is written to fault_faults and fault_held (the jobs the process held and had started: the only runs
// that may be redone), and every stall of the whole machine is recorded as a fault by the fleet's StallWatch,
// never reported as a failure. A slot whose process was killed, or closed by the operator, is started again.
//
// The worker slots reach PostgreSQL through a TCP proxy each (test/support/tcp-proxy.ts), so that a network fault
// hits one process: `cut` resets its connections, `blackhole` stops its open connections carrying bytes for a while
// (nobody told; new connections still work) and then resets them. Their run log goes to the database directly.
import type pg from 'pg';
import type { PostgresServer } from '@internal/pg-harness';
import { ProcessPool, WorkerFleet, type WorkerHandle } from '../faults/support/fleet.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import type { ProcessPlan } from './generator.js';
import type { SimMetrics, WorkerOp } from './sim-worker.js';

export interface SimProcess {
  plan: ProcessPlan;
  fleet: WorkerFleet;
  handle: WorkerHandle | undefined;
  /** A start, kill or freeze in progress: faults on a busy slot are skipped (and recorded as skipped). */
  busy: boolean;
  /** The proxy between the process and PostgreSQL (worker slots only; the enqueuing slot is never faulted). */
  proxy?: TcpProxy;
}

export class SimProcesses {
  readonly slots = new Map<string, SimProcess>();
  private readonly pool: ProcessPool;
  private seq = 0;
  /** Faults injected, by kind (what actually happened, for the report). */
  readonly injected: Record<string, number> = {};

  private constructor(
    script: string,
    logDir: string,
    url: string,
    private readonly db: pg.Pool,
    plans: ProcessPlan[],
    proxies: Map<string, TcpProxy & { url: string }>,
    private readonly bounced: string | undefined,
  ) {
    this.pool = new ProcessPool(script, logDir, 1);
    for (const plan of plans) {
      const proxy = proxies.get(plan.slot);
      const fleet = new WorkerFleet({
        processes: this.pool,
        url: proxy?.url ?? bounced ?? url,
        recordsUrl: url,
        db,
        poolSize: plan.poolSize,
        bootTimeoutMs: 120_000,
        queue: {
          leaseMs: plan.leaseMs,
          shutdownGraceMs: plan.shutdownGraceMs,
          maintenance: {
            sweepIntervalMs: plan.sweepIntervalMs,
            completedRetentionMs: plan.completedRetentionMs ?? 3_600_000,
            ...(plan.history ? { history: { partitionWidth: 'hour', moveAfterMs: plan.history.moveAfterMs, moveIntervalMs: plan.history.moveIntervalMs } } : {}),
          },
          ...(plan.recurringPollMs ? { recurring: { pollIntervalMs: plan.recurringPollMs } } : {}),
          ...(plan.jobLogs ? { jobLogs: plan.jobLogs } : {}),
          queues: plan.queues,
          // Behind PgBouncer in transaction mode: unnamed statements, and LISTEN on PostgreSQL itself (docs/guides/pgbouncer.md).
          ...(bounced ? { transactionPooler: true, listenerUrl: url } : {}),
        },
      });
      this.slots.set(plan.slot, { plan, fleet, handle: undefined, busy: false, proxy });
    }
  }

  /**
   * The processes of `plans`, every worker slot behind a proxy of its own; with `bounced` (PgBouncer's URL of the
   * database), every process reaches PostgreSQL through PgBouncer, the workers' proxies in front of it.
   */
  static async create(script: string, logDir: string, url: string, db: pg.Pool, plans: ProcessPlan[], bounced?: string): Promise<SimProcesses> {
    const proxies = new Map<string, TcpProxy & { url: string }>();
    for (const plan of plans) if (plan.slot !== 'e') proxies.set(plan.slot, await TcpProxy.start(bounced ?? url));
    return new SimProcesses(script, logDir, url, db, plans, proxies, bounced);
  }

  async startAll(): Promise<void> {
    this.pool.warm();
    for (const slot of this.slots.keys()) await this.start(slot);
  }

  async start(slot: string): Promise<void> {
    const p = this.slots.get(slot)!;
    p.busy = true;
    try {
      p.handle = await p.fleet.start(slot);
      const handle = p.handle;
      void handle.exited.then(() => this.recordExit(handle));
    } finally {
      p.busy = false;
    }
  }

  private async recordExit(handle: WorkerHandle): Promise<void> {
    const meant = (handle as WorkerHandle & { meant?: boolean }).meant === true;
    const how = handle.child.signalCode ?? `exit ${handle.child.exitCode}`;
    await this.db.query('INSERT INTO sim_exits (worker, pid, how, meant) VALUES ($1, $2, $3, $4)', [handle.workerId, handle.pid, how, meant]).catch(() => undefined);
  }

  /** Sends an op to a slot's process; resolves with its answer. */
  ask<T>(slot: string, op: WorkerOp, timeoutMs = 120_000): Promise<T> {
    const handle = this.slots.get(slot)?.handle;
    if (!handle || !handle.ready || handle.stopped) return Promise.reject(new Error(`slot ${slot} has no running process`));
    const seq = ++this.seq;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => done(new Error(`${slot} did not answer ${op.op} in ${timeoutMs} ms`)), timeoutMs);
      const onMessage = (m: { type: string; seq: number; ok: boolean; result: T; error: string }) => {
        if (m.type !== 'op-result' || m.seq !== seq) return;
        if (m.ok) done(undefined, m.result);
        else done(new Error(m.error));
      };
      const onExit = () => done(new Error(`${slot} exited before it answered ${op.op}`));
      const done = (error: Error | undefined, result?: T) => {
        clearTimeout(timer);
        handle.child.off('message', onMessage);
        handle.child.off('exit', onExit);
        if (error) reject(error);
        else resolve(result!);
      };
      handle.child.on('message', onMessage);
      handle.child.once('exit', onExit);
      handle.child.send({ type: 'op', seq, ...op });
    });
  }

  /** The job counters of every process still running (after the drain: nothing moves any more), by worker id. */
  async readMetrics(): Promise<SimMetrics[]> {
    const answers = await Promise.allSettled([...this.slots.keys()].map((slot) => this.ask<SimMetrics>(slot, { op: 'metrics' }, 15_000)));
    return answers.flatMap((a) => (a.status === 'fulfilled' ? [a.value] : []));
  }

  /** SIGKILL the slot's process, then start a new one after `restartMs`. */
  async kill(slot: string, restartMs: number): Promise<boolean> {
    const p = this.slots.get(slot)!;
    if (p.busy || !p.handle || !p.handle.ready || p.handle.stopped) return false;
    p.busy = true;
    (p.handle as WorkerHandle & { meant?: boolean }).meant = true;
    this.count('kill');
    await p.fleet.kill(p.handle);
    p.handle = undefined;
    await sleep(restartMs);
    p.busy = false;
    await this.start(slot);
    return true;
  }

  /** SIGSTOP the slot's process for `holdMs` (past its lease when holdMs > leaseMs), then SIGCONT. */
  async freeze(slot: string, holdMs: number): Promise<boolean> {
    const p = this.slots.get(slot)!;
    if (p.busy || !p.handle || !p.handle.ready || p.handle.stopped) return false;
    p.busy = true;
    this.count(holdMs > p.plan.leaseMs ? 'stop-past-lease' : 'stop-within-lease');
    const handle = p.handle;
    try {
      await p.fleet.freeze(handle);
      await sleep(holdMs);
      await p.fleet.resume(handle);
    } finally {
      p.busy = false;
    }
    return true;
  }

  /** SIGSTOP every worker process at once for `holdMs`, then SIGCONT (generator.ts, addStalls): a stalled machine. */
  async freezeAll(holdMs: number): Promise<boolean> {
    const workers = [...this.slots.keys()].filter((slot) => slot !== 'e');
    this.count('stall');
    const frozen = await Promise.all(workers.map((slot) => this.freeze(slot, holdMs)));
    return frozen.some(Boolean);
  }

  /** Resets every connection of the slot's process (the proxy destroys both ends); new connections work at once. */
  async cut(slot: string): Promise<boolean> {
    const p = this.slots.get(slot)!;
    if (p.busy || !p.proxy || !p.handle || !p.handle.ready || p.handle.stopped) return false;
    p.busy = true;
    try {
      this.count('cut');
      const since = await this.heldNow(p.handle);
      p.proxy.cut();
      await this.recordNetFault(p.handle, 'CUT', since);
    } finally {
      p.busy = false;
    }
    return true;
  }

  /**
   * The slot's open connections stop carrying bytes both ways for `holdMs` (past its lease when longer), nobody
   * told, then are reset. New connections work meanwhile, as behind a NAT that dropped the flows.
   */
  async blackhole(slot: string, holdMs: number): Promise<boolean> {
    const p = this.slots.get(slot)!;
    if (p.busy || !p.proxy || !p.handle || !p.handle.ready || p.handle.stopped) return false;
    p.busy = true;
    try {
      this.count(holdMs > p.plan.leaseMs ? 'blackhole-past-lease' : 'blackhole-within-lease');
      const since = await this.heldNow(p.handle);
      p.proxy.blackHole();
      await sleep(holdMs);
      p.proxy.cut();
      await this.recordNetFault(p.handle, 'BLACKHOLE', since);
    } finally {
      p.busy = false;
    }
    return true;
  }

  /** The database clock, and the jobs the process holds and has started now (their handler wrote its start). */
  private async heldNow(handle: WorkerHandle): Promise<{ at: string; held: string[] }> {
    const { rows } = await this.db.query<{ at: string; held: string[] }>(
      `SELECT clock_timestamp()::text AS at, ARRAY(
         SELECT DISTINCT r.job_id || '/' || r.attempt FROM sim_runs r JOIN background_jobs j ON j.id = r.job_id
         WHERE r.worker = $1 AND j.status = 'processing' AND j.locked_by = $1)::text[] AS held`,
      [handle.workerId],
    );
    return rows[0];
  }

  /**
   * A network fault is a fault of its process like a signal, written at its end (fault_faults; as a stall is) so
   * that a claim the fault left charged but unstarted counts as the fault's. What may run again because of it
   * (fault_held): the jobs the process held and had started when it began, and every run it started while the
   * fault lasted (a job claimed just before a black hole starts, and its outcome or heartbeat waits on a silent
   * connection until the lease is gone: seed 31, job 1113). A start whose run-log row was on its way at the end is
   * written within a moment: read after 300 ms.
   */
  private async recordNetFault(handle: WorkerHandle, signal: 'CUT' | 'BLACKHOLE', since: { at: string; held: string[] }): Promise<void> {
    await sleep(300);
    await this.db.query(
      `WITH f AS (INSERT INTO fault_faults (worker, pid, signal) VALUES ($1, $2, $3))
       INSERT INTO fault_held (worker, job_id, attempt)
       SELECT $1, split_part(h, '/', 1)::int8, split_part(h, '/', 2)::int FROM unnest($4::text[]) AS h
       UNION SELECT $1, r.job_id, r.attempt FROM sim_runs r WHERE r.worker = $1 AND r.started_at >= $5::timestamptz`,
      [handle.workerId, handle.pid, signal, since.held, since.at],
    );
  }

  /**
   * PostgreSQL restarted under every process: a fast shutdown (every session terminated, LISTEN too), down `downMs`,
   * then up on the same port and data. Written, once the server answers again and its recovery has passed (a second
   * and two of the longest lease), as a fault of every live process (signal 'RESTART') with what may run again
   * because of it: every run not ended, and every run that ended from two leases before the stop until then (its
   * outcome may have been on its way, and lost with the connection; or, in the recovery, every process's loops
   * reconnect at once on two cores, and a run claimed then lost its 1 s lease while the database answered in
   * 700 ms: seed 61). False when the server cannot be restarted (one given by URL).
   */
  async restartServer(server: PostgresServer | undefined, downMs: number): Promise<boolean> {
    if (!server?.restart) return false;
    const slots = [...this.slots.values()];
    for (const p of slots) p.busy = true;
    try {
      this.count('restart');
      const { rows } = await this.db.query<{ at: string }>('SELECT clock_timestamp()::text AS at');
      await server.restart(downMs);
      for (let i = 0; !(await this.db.query('SELECT 1').then(() => true, () => false)); i++) {
        if (i > 300) throw new Error('PostgreSQL did not answer within 30 s of its restart');
        await sleep(100);
      }
      // What the processes could not reach the database for: from the stop until now, and behind PgBouncer for its
      // server_login_retry more (15 s: it refuses its clients' logins that long after one failed).
      await this.db.query(`INSERT INTO sim_outages (from_at, until_at) VALUES ($1, clock_timestamp() + $2 * interval '1 millisecond')`, [rows[0].at, this.bounced ? PGBOUNCER_LOGIN_RETRY_MS : 0]);
      await sleep(1_000 + 2 * Math.max(...slots.map((p) => p.plan.leaseMs)));
      for (const p of slots) {
        if (!p.handle || p.handle.stopped) continue;
        await this.db.query(
          `WITH f AS (INSERT INTO fault_faults (worker, pid, signal) VALUES ($1, $2, 'RESTART'))
           INSERT INTO fault_held (worker, job_id, attempt)
           SELECT DISTINCT $1, r.job_id, r.attempt FROM sim_runs r
           WHERE r.worker = $1 AND (r.ended_at IS NULL OR r.ended_at >= $3::timestamptz - $4 * interval '1 millisecond')`,
          [p.handle.workerId, p.handle.pid, rows[0].at, 2 * p.plan.leaseMs],
        );
      }
    } finally {
      for (const p of slots) p.busy = false;
    }
    return true;
  }

  /**
   * The operator's app.close() in the slot's process, then a fresh process. What the close cut is written as a
   * fault (signal 'CLOSE') with the jobs the process held and had started: runs past the grace are put back.
   */
  async close(slot: string): Promise<{ ms: number } | undefined> {
    const p = this.slots.get(slot)!;
    if (p.busy || !p.handle || !p.handle.ready || p.handle.stopped) return undefined;
    p.busy = true;
    this.count('close');
    const handle = p.handle;
    try {
      const held = await this.db.query<{ id: string }>(`SELECT id::text FROM background_jobs WHERE status = 'processing' AND locked_by = $1`, [handle.workerId]);
      await this.db.query(
        `WITH f AS (INSERT INTO fault_faults (worker, pid, signal) VALUES ($1, $2, 'CLOSE'))
         INSERT INTO fault_held (worker, job_id, attempt) SELECT $1, r.job_id, r.attempt FROM sim_runs r WHERE r.worker = $1 AND r.job_id = ANY($3::int8[])`,
        [handle.workerId, handle.pid, held.rows.map((r) => r.id)],
      );
      const answer = await this.ask<{ ms: number }>(slot, { op: 'close' });
      // And every run the close met, also one whose handler was called between the read above and the close (a job a
      // claim had started before it; the process called the handler late): what the close cut is a fault of it too
      // (seed 1869304768: a run begun as the close began, put back uncharged at its grace, then cancelled queued).
      await this.db.query(
        `INSERT INTO fault_held (worker, job_id, attempt)
         SELECT r.worker, r.job_id, r.attempt FROM sim_runs r
         WHERE r.worker = $1 AND (r.ended_at IS NULL OR r.ended_at >= (SELECT max(f.at) FROM fault_faults f WHERE f.worker = $1 AND f.signal = 'CLOSE'))
           AND NOT EXISTS (SELECT 1 FROM fault_held h WHERE h.worker = r.worker AND h.job_id = r.job_id AND h.attempt = r.attempt)`,
        [handle.workerId],
      );
      (handle as WorkerHandle & { meant?: boolean }).meant = true;
      p.fleet.live.delete(handle.workerId);
      handle.child.kill('SIGKILL');
      await handle.exited;
      p.handle = undefined;
      p.busy = false;
      await this.start(slot);
      return answer;
    } finally {
      p.busy = false;
    }
  }

  /**
   * The end: SIGTERM every process and time its exit. Returns the processes that took longer than their grace
   * plus `slackMs` (then SIGKILLed) or exited with an error.
   */
  async terminateAll(slackMs: number): Promise<{ worker: string; ms: number; how: string; graceMs: number }[]> {
    const results = await Promise.all(
      [...this.slots.values()].map(async (p) => {
        const handle = p.handle;
        if (!handle) return undefined;
        (handle as WorkerHandle & { meant?: boolean }).meant = true;
        handle.child.kill('SIGCONT');
        const t = Date.now();
        handle.child.kill('SIGTERM');
        const limit = p.plan.shutdownGraceMs + slackMs;
        const inTime = await Promise.race([handle.exited.then(() => true), sleep(limit).then(() => false)]);
        const ms = Date.now() - t;
        if (!inTime) handle.child.kill('SIGKILL');
        await handle.exited;
        await this.db.query('UPDATE sim_exits SET ms = $2 WHERE worker = $1', [handle.workerId, ms]).catch(() => undefined);
        const how = handle.child.signalCode ?? `exit ${handle.child.exitCode}`;
        return { worker: handle.workerId, ms, how, graceMs: p.plan.shutdownGraceMs, inTime };
      }),
    );
    for (const p of this.slots.values()) await p.fleet.killAll();
    await this.pool.killAll();
    await this.closeProxies();
    return results.filter((r) => r !== undefined && (!r.inTime || r.how !== 'exit 0')).map((r) => ({ worker: r!.worker, ms: r!.ms, how: r!.how, graceMs: r!.graceMs }));
  }

  async killAll(): Promise<void> {
    for (const p of this.slots.values()) await p.fleet.killAll();
    await this.pool.killAll();
    await this.closeProxies();
  }

  private async closeProxies(): Promise<void> {
    for (const p of this.slots.values()) await p.proxy?.close();
  }

  /** The machine stalls every fleet's watch recorded. */
  stalls(): number {
    return [...this.slots.values()].reduce((n, p) => n + p.fleet.stalls.length, 0);
  }

  private count(kind: string): void {
    this.injected[kind] = (this.injected[kind] ?? 0) + 1;
  }
}

/** PgBouncer's server_login_retry (its default, which libs/pg-harness keeps). */
const PGBOUNCER_LOGIN_RETRY_MS = 15_000;

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
