import type { LoggerService } from '@nestjs/common';
import pg from 'pg';
import { WAKE_CONNECTION_DIAL, WAKE_CONNECTION_LOST } from '../pg-queue.messages.js';
import type { JobStore } from '../store/job.store.js';
import { errorLine } from '../utils/error-text.js';
import { cutClient } from '../utils/pg-client.js';
import { RetryBackoff, withDeadline, withTimeout } from '../utils/retry-backoff.js';

/** How long a wake-up's NOTIFY (or a ping) may take before its connection is taken for dead. */
export const WAKE_SEND_TIMEOUT_MS = 2_000;

export interface WakeConnectionLiveness {
  /** A `SELECT 1` on the connection after this long without a wake-up, and again as long as it stays idle. */
  pingEveryMs: number;
  /** A NOTIFY or a ping unanswered this long means the connection is dead. */
  timeoutMs: number;
}

const DEFAULT_LIVENESS: WakeConnectionLiveness = { pingEveryMs: 5_000, timeoutMs: WAKE_SEND_TIMEOUT_MS };

/** A dial of the dedicated connection: `client` once connected. */
interface Dial {
  connecting: Promise<pg.Client>;
  client?: pg.Client;
  /** A send already waited timeoutMs for this dial: the next ones go through the pool until it settles. */
  slow: boolean;
}

/**
 * The WakeSender's own connection, outside the queue's pool: a wake-up never waits for a pool connection
 * behind claims, heartbeats and the enqueues it follows, and one in trouble never holds one of them. Dialled
 * as the pool dials (the same settings, through a transaction pooler when the pool goes through one: every
 * wake-up is one autocommit statement). Connected on the first wake-up.
 *
 * A connection that a NAT or load balancer dropped without a reset would hold every wake-up of the process until
 * the query timeout, a minute or never (issue 18 item 5: enqueue-to-start went from 20 ms to 29 s, the poll). So:
 * - a NOTIFY has timeoutMs; one that passes it drops the connection, and the next wake-up dials a new one;
 * - an idle connection is pinged every pingEveryMs, so a dead one is found before a wake-up needs it;
 * - while the connection is down and cannot be dialled (the server at max_connections, a network that refuses
 *   new flows; dials are retried with backoff), or a dial is slower than timeoutMs, a wake-up goes out on one of
 *   the pool's connections: a wake-up that waits for a pool connection beats one that waits for the poll.
 */
export class WakeConnection {
  private dial: Dial | undefined;
  /** performance.now() before which no new dial is made (after a failed one). */
  private redialAt = 0;
  private readonly dialBackoff: RetryBackoff;
  private pingTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly store: JobStore,
    private readonly logger: Pick<LoggerService, 'warn' | 'log'>,
    private readonly liveness: WakeConnectionLiveness = DEFAULT_LIVENESS,
  ) {
    this.dialBackoff = new RetryBackoff(WAKE_CONNECTION_DIAL, logger, 1_000, 30_000);
  }

  async send(queues: string[]): Promise<void> {
    // An enqueue that raced the shutdown: no new connection that nothing would close.
    if (this.closed) throw new Error('the wake-up connection is closed (the app is shutting down)');
    const client = await this.connected();
    if (client) {
      try {
        await withTimeout(this.store.wakeQueues(queues, client), this.liveness.timeoutMs, 'the wake-up NOTIFY');
        this.armPing(client);
        return;
      } catch (error) {
        this.lose(client, error);
      }
    }
    await withTimeout(this.store.wakeQueues(queues), this.liveness.timeoutMs, 'the wake-up NOTIFY on a connection of the queue pool');
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.pingTimer);
    const dial = this.dial;
    this.dial = undefined;
    if (!dial) return;
    const client = await dial.connecting.catch(() => undefined);
    // A polite goodbye when the server answers, but not a wait on a dead peer.
    if (client) await withDeadline(client.end().catch(() => undefined), 500);
  }

  /** The dedicated client when it is connected (dialled now if need be); undefined: send through the pool. */
  private async connected(): Promise<pg.Client | undefined> {
    if (!this.dial) {
      if (performance.now() < this.redialAt) return undefined;
      this.dial = this.connect();
    }
    const dial = this.dial;
    if (dial.client) return dial.client;
    if (dial.slow) return undefined;
    // A dial that failed, or is still going after timeoutMs: this send (and the next, until it settles) uses the pool.
    const client = await withTimeout(dial.connecting, this.liveness.timeoutMs, 'dialling the wake-up connection').catch(() => undefined);
    if (!client) dial.slow = true;
    return client;
  }

  private connect(): Dial {
    // password spelled out: pg-pool keeps it as a hidden (non-enumerable) property, which a spread would drop
    // (a password function, such as an IAM token, lives there).
    const client = new pg.Client({ ...this.config, password: this.config.password, application_name: 'nestjs-pg-queue wake-ups' });
    const dial: Dial = { connecting: client.connect().then(() => client), slow: false };
    void dial.connecting.then(
      () => {
        if (this.dial !== dial) return void client.end().catch(() => undefined); // closed or replaced meanwhile
        dial.client = client;
        this.dialBackoff.succeeded();
        this.armPing(client);
      },
      (error: unknown) => {
        client.end().catch(() => undefined);
        if (this.dial !== dial) return;
        this.dial = undefined;
        this.redialAt = performance.now() + this.dialBackoff.failed(error);
      },
    );
    // Lost while idle (server restart, pg_terminate_backend, network): the next wake-up dials again. Without
    // a listener an 'error' event would crash the app.
    client.on('error', (error) => this.lose(client, error));
    client.on('end', () => this.lose(client, new Error('the connection ended')));
    return dial;
  }

  /** Pings the client once it has been idle for pingEveryMs (each wake-up on it starts the wait again). */
  private armPing(client: pg.Client): void {
    clearTimeout(this.pingTimer);
    if (this.closed) return;
    // Unref'd: an idle wake-up connection never keeps the process alive on its own.
    this.pingTimer = setTimeout(() => {
      if (this.dial?.client !== client) return;
      void withTimeout(client.query('SELECT 1'), this.liveness.timeoutMs, 'the wake-up connection ping').then(
        () => this.armPing(client),
        (error: unknown) => this.lose(client, error),
      );
    }, this.liveness.pingEveryMs).unref();
  }

  /** Forgets this client (if it is still the current one), says so, and cuts it: a dead peer never answers a goodbye. */
  private lose(client: pg.Client, error: unknown): void {
    const dial = this.dial;
    if (dial?.client !== client) return;
    this.dial = undefined;
    clearTimeout(this.pingTimer);
    if (!this.closed) this.logger.warn(WAKE_CONNECTION_LOST(errorLine(error)));
    cutClient(client);
  }
}
