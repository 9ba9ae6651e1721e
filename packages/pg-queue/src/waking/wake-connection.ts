import type { LoggerService } from '@nestjs/common';
import pg from 'pg';
import { WAKE_CONNECTION_LOST } from '../pg-queue.messages.js';
import type { JobStore } from '../store/job.store.js';
import { errorLine } from '../utils/error-text.js';
import { withDeadline } from '../utils/retry-backoff.js';

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
      await this.store.wakeQueues(queues, await connecting);
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
