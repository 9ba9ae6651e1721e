import type { LoggerService } from '@nestjs/common';
import pg from 'pg';
import { WAKE_CONNECTION_LOST } from '../pg-queue.messages.js';
import type { JobStore } from '../store/job.store.js';
import { errorLine } from '../utils/error-text.js';
import { withDeadline, withTimeout } from '../utils/retry-backoff.js';

/** How long a wake-up's NOTIFY may take before its connection is taken for dead. */
export const WAKE_SEND_TIMEOUT_MS = 2_000;

/**
 * The WakeSender's own connection, outside the queue's pool: a wake-up never waits for a pool connection
 * behind claims, heartbeats and the enqueues it follows, and one in trouble never holds one of them. Dialled
 * as the pool dials (the same settings, through a transaction pooler when the pool goes through one: every
 * wake-up is one autocommit statement). Connected on the first wake-up, and again on the next one after it
 * was lost; the WakeSender retries a failed send with backoff.
 */
export class WakeConnection {
  private client: Promise<pg.Client> | undefined;
  private closed = false;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly store: JobStore,
    private readonly logger: Pick<LoggerService, 'warn'>,
  ) {}

  async send(queues: string[]): Promise<void> {
    // An enqueue that raced the shutdown: no new connection that nothing would close.
    if (this.closed) throw new Error('the wake-up connection is closed (the app is shutting down)');
    const connecting = (this.client ??= this.connect());
    try {
      const client = await connecting; // bounded by the connect timeout
      // A NOTIFY answers in milliseconds; a connection a NAT or load balancer dropped without a reset would hold
      // it (and every wake-up behind it) until the query timeout, a minute or never. Dropped, the next send redials.
      await withTimeout(this.store.wakeQueues(queues, client), WAKE_SEND_TIMEOUT_MS, 'the wake-up NOTIFY');
    } catch (error) {
      this.drop(connecting);
      throw error;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const connecting = this.client;
    this.client = undefined;
    if (!connecting) return;
    const client = await connecting.catch(() => undefined);
    // A polite goodbye when the server answers, but not a wait on a dead peer.
    if (client) await withDeadline(client.end().catch(() => undefined), 500);
  }

  private connect(): Promise<pg.Client> {
    // password spelled out: pg-pool keeps it as a hidden (non-enumerable) property, which a spread would drop
    // (a password function, such as an IAM token, lives there).
    const client = new pg.Client({ ...this.config, password: this.config.password, application_name: 'nestjs-pg-queue wake-ups' });
    const connecting = client.connect().then(
      () => client,
      (error: unknown) => {
        client.end().catch(() => undefined);
        throw error;
      },
    );
    // Lost while idle (server restart, pg_terminate_backend, network): the next wake-up dials again. Without
    // a listener an 'error' event would crash the app.
    client.on('error', (error) => {
      this.logger.warn(WAKE_CONNECTION_LOST(errorLine(error)));
      this.drop(connecting);
    });
    client.on('end', () => this.drop(connecting));
    return connecting;
  }

  /** Forgets this client (if it is still the current one) and ends it. */
  private drop(connecting: Promise<pg.Client> | undefined): void {
    if (connecting === undefined || this.client !== connecting) return;
    this.client = undefined;
    void connecting.then((client) => client.end().catch(() => undefined), () => undefined);
  }
}
