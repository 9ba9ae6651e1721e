import { PgQueueError } from '../errors/pg-queue.error.js';
import { MANAGER_OF_ANOTHER_DATABASE } from '../pg-queue.messages.js';
import { DATABASE_SQL } from '../store/database.sql.js';
import type { DatabaseIdentityRow } from '../store/job-store.types.js';
import type { CallerTransaction } from '../transactions/caller-transaction.js';
import { isTypeOrmManager } from '../transactions/clients/typeorm.js';
import type { TransactionClient } from '../transactions/transaction-client.js';

/**
 * Refuses a transactional enqueue whose `manager` is on another database than the job's queue, when an app has several
 * (a job written there would be in a database no worker of its queue reads, or in the wrong queue table, silently).
 * The caller's connection is asked once (DATABASE_SQL.databaseIdentity, in its transaction) and remembered: per DataSource for a
 * TypeORM manager (a DataSource is one database), per client object for the others (a pg client keeps its connection;
 * a Prisma or Kysely transaction object lives one transaction). Apps with one database never get here.
 */
export class DatabaseCheck {
  private own: Promise<DatabaseIdentityRow> | undefined;
  private readonly known = new WeakMap<object, Promise<DatabaseIdentityRow>>();

  constructor(
    private readonly databaseName: string,
    private readonly ownIdentity: () => Promise<DatabaseIdentityRow>,
  ) {}

  async assertSame(client: TransactionClient, tx: CallerTransaction, method: string, queue: string): Promise<void> {
    const key = isTypeOrmManager(client) ? client.connection : client;
    let theirs = this.known.get(key);
    if (!theirs) {
      theirs = tx.query<DatabaseIdentityRow>(DATABASE_SQL.databaseIdentity, []).then((rows) => rows[0]);
      this.known.set(key, theirs);
      theirs.catch(() => this.known.delete(key)); // asked again next time (an aborted transaction, a lost connection)
    }
    if (!this.own) {
      this.own = this.ownIdentity();
      this.own.catch(() => (this.own = undefined));
    }
    const [mine, other] = await Promise.all([this.own, theirs]);
    if (mine.database === other.database && mine.started === other.started) return;
    throw new PgQueueError(MANAGER_OF_ANOTHER_DATABASE(method, queue, this.databaseName, describe(other), describe(mine)));
  }
}

function describe(identity: DatabaseIdentityRow): string {
  return `"${identity.database}" at ${identity.host}${identity.port === null ? '' : `:${identity.port}`}`;
}
