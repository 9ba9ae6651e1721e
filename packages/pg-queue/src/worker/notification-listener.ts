import type { LoggerService } from '@nestjs/common';
import pg from 'pg';
import { JOBS_CHANNEL } from '../pg-queue.constants.js';
import { CANCEL_CHANNEL } from '../store/job.sql.js';
import { RetryBackoff, sleep } from '../utils/retry-backoff.js';

export interface ListenerEvents {
  /** A job was inserted or put back in this queue. */
  onJobs(queue: string): void;
  /** A running job was cancelled. */
  onCancel(jobId: string): void;
  /** LISTEN is (re)established: anything sent while it was down was missed, so look now. */
  onUp(): void;
  /** LISTEN is down: fall back to polling. */
  onDown(): void;
}

/**
 * One dedicated session connection for LISTEN, outside the pool (a pooled connection would be handed
 * back and the LISTEN lost with it; PgBouncer in transaction mode drops it silently, hence listenerUrl).
 * Reconnects with backoff, forever, until closed.
 */
export class NotificationListener {
  private client: pg.Client | undefined;
  private closed = false;
  private running: Promise<void> | undefined;
  private readonly backoff: RetryBackoff;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly events: ListenerEvents,
    private readonly logger: LoggerService,
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
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
    await this.running;
  }

  private async run(): Promise<void> {
    while (!this.closed) {
      const connection = await this.connect();
      if (!connection) continue; // connect failed: backoff already slept
      this.events.onUp();
      const error = await connection.lost;
      this.client = undefined;
      if (this.closed) return;
      this.events.onDown();
      await sleep(this.backoff.failed(error));
    }
  }

  /** Connects and LISTENs; `lost` settles when the connection goes. Undefined if it could not connect. */
  private async connect(): Promise<{ lost: Promise<unknown> } | undefined> {
    const client = new pg.Client(this.config);
    let onLost!: (error: unknown) => void;
    const lost = new Promise<unknown>((resolve) => (onLost = resolve));
    client.on('error', (e) => onLost(e));
    client.on('end', () => onLost(new Error('connection ended')));
    client.on('notification', (n) => {
      if (n.channel === JOBS_CHANNEL && n.payload) this.events.onJobs(n.payload);
      else if (n.channel === CANCEL_CHANNEL && n.payload) this.events.onCancel(n.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${JOBS_CHANNEL}; LISTEN ${CANCEL_CHANNEL}`);
    } catch (error) {
      await client.end().catch(() => undefined);
      if (!this.closed) await sleep(this.backoff.failed(error));
      return undefined;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return undefined;
    }
    this.client = client;
    this.backoff.succeeded();
    return { lost }; // wrapped: an async function returning a bare promise would wait for it
  }
}
