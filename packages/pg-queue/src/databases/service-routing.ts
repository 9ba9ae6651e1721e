import { PgQueueError } from '../errors/pg-queue.error.js';
import type { DatabaseIdentityRow } from '../store/job-store.types.js';
import type { CallerTransaction } from '../transactions/caller-transaction.js';
import { callerTransaction, type TransactionClient } from '../transactions/transaction-client.js';
import type { QueueDefinition } from '../typed/queue-definition.js';
import { DEFAULT_DATABASE } from '../pg-queue.constants.js';
import { DatabaseCheck } from './database-check.js';
import type { DatabaseEntry, QueueDatabases } from './queue-databases.js';
import { ownerOfCall } from './queue-owner.js';

type Queue = string | QueueDefinition<unknown, unknown>;

/**
 * Which database a QueueService call belongs to when the app has several (README: "Several databases"): the service
 * that owns a call's queues, and the check that the caller's transaction is on this service's database. An app with
 * one unnamed database pays one property read per call (`routed`), nothing more.
 */
export class ServiceRouting<S> {
  private checkOfDatabase?: DatabaseCheck;

  constructor(
    private readonly self: S,
    /** The app's databases (absent in the CLI). */
    private readonly databases: QueueDatabases<DatabaseEntry & { readonly service: S }> | undefined,
    private readonly databaseName: string,
    /** This service's database, asked once by DatabaseCheck (the store's DATABASE_SQL.databaseIdentity). */
    private readonly ownIdentity: () => Promise<DatabaseIdentityRow>,
  ) {}

  /**
   * The app has several databases (or this one is named): enqueues are routed, and a manager's database checked. Read
   * per call: the app's other databases register after the service is made.
   */
  private get routed(): boolean {
    return this.databases !== undefined && (this.databaseName !== DEFAULT_DATABASE || this.databases.several);
  }

  /** The service of the PgQueueModule named `name`; this one for its own name. */
  database(name: string): S {
    if (name === this.databaseName) return this.self;
    if (!this.databases) throw new PgQueueError(`database("${name}") needs the QueueService of a PgQueueModule app.`);
    return this.databases.get(name).service;
  }

  /** The service of the database that owns `queue` when that is another one (the app has several), else undefined. */
  elsewhere(queue: Queue): S | undefined {
    // The common app (one database, no name) skips the lookup; a named one also refuses a queue it does not own.
    return this.routed ? this.ownerElsewhere('enqueue', [queue]) : undefined;
  }

  /** elsewhere() for the jobs of one call: all of them must live in one database (one statement, one transaction). */
  elsewhereMany(method: string, queues: readonly Queue[]): S | undefined {
    return this.routed && queues.length > 0 ? this.ownerElsewhere(method, queues) : undefined;
  }

  private ownerElsewhere(method: string, queues: readonly Queue[]): S | undefined {
    const service = ownerOfCall(this.databases!, method, queues);
    return service === this.self ? undefined : service;
  }

  /**
   * The caller's transaction an enqueue joins (`client`: its manager or the ambient one; none: it autocommits),
   * checked to be on this database when the app has several (databases/database-check.ts); a promise only then, so
   * the common enqueue awaits nothing more.
   */
  joined(client: TransactionClient | undefined, method: string, queue: string): CallerTransaction | undefined | Promise<CallerTransaction | undefined> {
    if (client === undefined) return undefined;
    const tx = callerTransaction(client, method);
    if (!this.routed) return tx;
    const check = (this.checkOfDatabase ??= new DatabaseCheck(this.databaseName, this.ownIdentity));
    return check.assertSame(client, tx, method, queue).then(() => tx);
  }
}
