import type { LoggerService } from '@nestjs/common';
import pg from 'pg';
import { JOBS_CHANNEL } from '../pg-queue.constants.js';
import { CANCEL_CHANNEL, DONE_CHANNEL, LIMITS_CHANNEL, REVIEW_CHANNEL } from '../store/shared.sql.js';
import { EVENTS_CHANNEL } from '../store/events.sql.js';
import { abortConnect, cutClient } from '../utils/pg-client.js';
import { RetryBackoff, wakeableSleep, withDeadline, withTimeout } from '../utils/retry-backoff.js';

export interface ListenerEvents {
  /** A job was inserted or put back in this queue. */
  onJobs(queue: string): void;
  /** A running job was cancelled: that claim of it (`token`), or whichever when the notice names none. */
  onCancel(jobId: string, token: string | undefined): void;
  /** Jobs of this queue that workers may hold in their buffers were paused or rewritten: check them. */
  onReview?(queue: string): void;
  /** The queue's limits changed, or a partner's 429 blocked it or one of its keys: read its row again. */
  onLimits?(queue: string): void;
  /** LISTEN is (re)established: anything sent while it was down was missed, so look now. */
  onUp(): void;
  /** LISTEN is down: fall back to polling. */
  onDown(): void;
  /** A job someone waits on finished ("id:status" on DONE_CHANNEL; heard only by a listener given that channel). */
  onDone?(jobId: string, status: string): void;
  /** A flow ended ("flow:id:status" on DONE_CHANNEL, sent by its settle). */
  onFlowDone?(flowId: string, status: string): void;
  /** Events were recorded (EVENTS_CHANNEL; heard only by a listener given that channel: an event stream's). */
  onEvents?(): void;
}

export interface ListenerLiveness {
  /** A `SELECT 1` on the LISTEN connection this often. Default 5_000. */
  pingEveryMs: number;
  /** A ping unanswered this long means the connection is dead: it is destroyed and made again. Default 5_000. */
  pingTimeoutMs: number;
}

const DEFAULT_LIVENESS: ListenerLiveness = { pingEveryMs: 5_000, pingTimeoutMs: 5_000 };

/**
 * One dedicated session connection for LISTEN, outside the pool (a pooled connection would be handed
 * back and the LISTEN lost with it; PgBouncer in transaction mode drops it silently, hence listenerUrl).
 * Reconnects with backoff, forever, until closed.
 *
 * A LISTEN connection only receives, so a peer that vanished without a FIN or RST (a NAT or load balancer
 * dropping an idle flow, a host gone) looks alive forever: wake-ups fall to the poll and cancel notices are
 * lost. An application-level ping finds it within pingEveryMs + pingTimeoutMs; TCP keepalive, started early,
 * is a second line when the event loop is busy.
 */
export class NotificationListener {
  private client: pg.Client | undefined;
  private connecting: pg.Client | undefined;
  private closed = false;
  private running: Promise<void> | undefined;
  private readonly backoff: RetryBackoff;
  private wakeFromBackoff: (() => void) | undefined;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly events: ListenerEvents,
    private readonly logger: LoggerService,
    private readonly liveness: ListenerLiveness = DEFAULT_LIVENESS,
    /** What to LISTEN to: the workers' channels by default; waitFor's listener takes DONE_CHANNEL only. */
    private readonly channels: readonly string[] = [JOBS_CHANNEL, CANCEL_CHANNEL, REVIEW_CHANNEL, LIMITS_CHANNEL],
  ) {
    this.backoff = new RetryBackoff('LISTEN connection', logger, 100, 5_000);
  }

  get connected(): boolean {
    return this.client !== undefined;
  }

  start(): void {
    this.running ??= this.run();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.wakeFromBackoff?.(); // a backoff sleep must not hold shutdown (it lasts up to 5 s while the database is down)
    const client = this.client;
    this.client = undefined;
    // A client still connecting is only cut (its socket destroyed), never end()ed: pg never settles connect() on
    // a client ended while it connects, and close() then waited on this loop for ever (issue 18, item 20).
    abortConnect(this.connecting);
    // A polite goodbye when the server answers (no "unexpected EOF" in its log), but not a wait on a dead peer.
    if (client) await withDeadline(client.end().catch(() => undefined), 500);
    cutClient(client);
    await this.running;
  }

  private async run(): Promise<void> {
    while (!this.closed) {
      const connection = await this.connect();
      if ('failed' in connection) {
        await this.sleepBackoff(connection.failed);
        continue;
      }
      this.events.onUp();
      const error = await connection.lost;
      cutClient(this.client);
      this.client = undefined;
      if (this.closed) return;
      this.events.onDown();
      await this.sleepBackoff(error);
    }
  }

  private async sleepBackoff(error: unknown): Promise<void> {
    if (this.closed) return;
    const sleep = wakeableSleep(this.backoff.failed(error));
    this.wakeFromBackoff = sleep.wake;
    await sleep.done;
    this.wakeFromBackoff = undefined;
  }

  /** Connects and LISTENs; `lost` settles when the connection goes (or stops answering pings). */
  private async connect(): Promise<{ lost: Promise<unknown> } | { failed: unknown }> {
    const client = new pg.Client({ keepAlive: true, keepAliveInitialDelayMillis: 5_000, ...this.config });
    this.connecting = client;
    let onLost!: (error: unknown) => void;
    const lost = new Promise<unknown>((resolve) => (onLost = resolve));
    client.on('error', (e) => onLost(e));
    client.on('end', () => onLost(new Error('connection ended')));
    client.on('notification', (n) => {
      if (n.channel === JOBS_CHANNEL && n.payload) this.events.onJobs(n.payload);
      else if (n.channel === CANCEL_CHANNEL && n.payload) {
        const [jobId, token] = n.payload.split(':', 2);
        this.events.onCancel(jobId, token);
      } else if (n.channel === REVIEW_CHANNEL && n.payload) {
        this.events.onReview?.(n.payload);
      } else if (n.channel === LIMITS_CHANNEL && n.payload) {
        this.events.onLimits?.(n.payload);
      } else if (n.channel === EVENTS_CHANNEL) {
        this.events.onEvents?.();
      } else if (n.channel === DONE_CHANNEL && n.payload?.startsWith('flow:')) {
        const [, flowId, status] = n.payload.split(':', 3);
        this.events.onFlowDone?.(flowId, status);
      } else if (n.channel === DONE_CHANNEL && n.payload) {
        const [jobId, status] = n.payload.split(':', 2);
        this.events.onDone?.(jobId, status);
      }
    });
    try {
      await client.connect();
      await client.query(this.channels.map((channel) => `LISTEN ${channel}`).join('; '));
    } catch (error) {
      cutClient(client);
      return { failed: error };
    } finally {
      this.connecting = undefined;
    }
    if (this.closed) {
      cutClient(client);
      return { failed: new Error('closed') };
    }
    this.client = client;
    this.backoff.succeeded();
    this.keepPinging(client, lost, onLost);
    return { lost }; // wrapped: an async function returning a bare promise would wait for it
  }

  /** Pings until the connection is lost; a ping that fails or goes unanswered ends it. */
  private keepPinging(client: pg.Client, lost: Promise<unknown>, onLost: (error: unknown) => void): void {
    let gone = false;
    void lost.then(() => (gone = true));
    const { pingEveryMs, pingTimeoutMs } = this.liveness;
    const ping = async (): Promise<void> => {
      if (gone || this.closed) return;
      try {
        await withTimeout(client.query('SELECT 1'), pingTimeoutMs, 'LISTEN connection ping');
      } catch (error) {
        onLost(error);
        return;
      }
      if (!gone) timer = setTimeout(() => void ping(), pingEveryMs).unref();
    };
    // Unref'd: the connection keeps the process alive while it is open; the ping timer never should on its own.
    let timer = setTimeout(() => void ping(), pingEveryMs).unref();
    void lost.then(() => clearTimeout(timer));
  }
}
