import { Global, Injectable, Module } from '@nestjs/common';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { DEFAULT_DATABASE } from '../pg-queue.constants.js';
import { DATABASE_TWICE, NAMED_WITHOUT_QUEUES, NO_DATABASE_FOR_QUEUE, QUEUE_IN_TWO_DATABASES, UNKNOWN_DATABASE } from '../pg-queue.messages.js';

/**
 * What the registry itself reads of a database: its name and the queues it lists. What else an entry holds (its
 * QueueService, workers, connection: QueueDatabase in queue-database.ts) is its users' type parameter, so that this
 * file, which the service imports, imports neither the service nor the worker pool.
 */
export interface DatabaseEntry {
  readonly name: string;
  /** The queues its options list (`queues`): a named database owns exactly these; the default one owns every other queue too. */
  readonly listed: ReadonlySet<string>;
}

/**
 * The app's PgQueueModule instances by database name, and which one owns each queue (docs/guides/several-databases.md).
 * One per app (PgQueueCoreModule is global and imported by every instance): each instance adds itself as its
 * QueueService is made, so the registry is complete before any onModuleInit runs (handler discovery asks it who owns a
 * queue). A queue listed by a named database belongs to it; any other queue to the default database (the instance
 * without a name); with no default database, an unlisted queue belongs to none and is refused by name.
 */
@Injectable()
export class QueueDatabases<D extends DatabaseEntry = DatabaseEntry> {
  /** The token of each instance's registration provider (PgQueueModule). */
  static readonly REGISTRATION = Symbol('pg-queue:database_registration');
  private readonly byName = new Map<string, D>();
  private readonly listedBy = new Map<string, D>();

  add(database: D): void {
    if (this.byName.has(database.name)) throw new PgQueueError(DATABASE_TWICE(database.name));
    if (database.name !== DEFAULT_DATABASE && database.listed.size === 0) throw new PgQueueError(NAMED_WITHOUT_QUEUES(database.name));
    for (const queue of database.listed) {
      const other = this.listedBy.get(queue);
      if (other) throw new PgQueueError(QUEUE_IN_TWO_DATABASES(queue, other.name, database.name));
    }
    this.byName.set(database.name, database);
    for (const queue of database.listed) this.listedBy.set(queue, database);
  }

  /** More than one database: enqueues are routed, and transactional ones checked against the queue's database. */
  get several(): boolean {
    return this.byName.size > 1;
  }

  /** The database that owns `queue`. */
  ownerOf(queue: string): D {
    const owner = this.listedBy.get(queue) ?? this.byName.get(DEFAULT_DATABASE);
    if (!owner) throw new PgQueueError(NO_DATABASE_FOR_QUEUE(queue, this.all().map((d) => d.name)));
    return owner;
  }

  get(name: string): D {
    const database = this.byName.get(name);
    if (!database) throw new PgQueueError(UNKNOWN_DATABASE(name, this.all().map((d) => d.name)));
    return database;
  }

  /** Every database: the default one first, then by name (the order instances registered in is Nest's, not the app's). */
  all(): D[] {
    return [...this.byName.values()].sort((a, b) => rank(a.name) - rank(b.name) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  private readonly dashboardPaths = new Map<string, string>();

  /** A dashboard mounted at `path` (as configured, under the app's global prefix) shows `database`. */
  addDashboard(database: string, path: string): void {
    this.dashboardPaths.set(database, path);
  }

  /** The app's dashboards by database, in all()'s order: each dashboard links to the others. */
  dashboards(): { database: string; path: string }[] {
    return this.all()
      .filter((d) => this.dashboardPaths.has(d.name))
      .map(({ name }) => ({ database: name, path: this.dashboardPaths.get(name)! }));
  }
}

/** Holds the app's one QueueDatabases: a static global module, so every PgQueueModule instance imports the same one. */
@Global()
@Module({ providers: [QueueDatabases], exports: [QueueDatabases] })
export class PgQueueCoreModule {}

const rank = (name: string) => (name === DEFAULT_DATABASE ? 0 : 1);
