import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { AMBIENT_HOST_MISSING } from '../pg-queue.messages.js';
import { RESOLVED_OPTIONS } from '../pg-queue.constants.js';
import { loadOptionalPeer } from '../utils/load-optional-peer.js';
import type { ResolvedModuleOptions } from '../utils/resolve-options.js';
import type { TransactionClient } from './transaction-client.js';

/** What the queue asks of @nestjs-cls/transactional's TransactionHost. */
interface TransactionHostLike {
  isTransactionActive(): boolean;
  readonly tx: unknown;
}

interface ClsTransactionalModule {
  TransactionHost: unknown;
  getTransactionHostToken(connectionName?: string): unknown;
}

/**
 * The transaction of the surrounding `@Transactional()` call (option ambientTransactions). @nestjs-cls/transactional
 * keeps it in the async context (AsyncLocalStorage) of the call: its TransactionHost says whether one is active
 * and hands out its client (`tx`: an EntityManager with the TypeORM adapter, the interactive transaction's client
 * with Prisma's, and so on). The host is looked up once, at boot, anywhere in the app (the plugin registers it
 * globally); without the package or the plugin the app does not start.
 */
@Injectable()
export class AmbientTransactions implements OnModuleInit {
  private host?: TransactionHostLike;

  constructor(
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedModuleOptions,
    private readonly moduleRef: ModuleRef,
  ) {}

  async onModuleInit(): Promise<void> {
    const setting = this.options.ambientTransactions;
    if (!setting) return;
    const loaded = await loadOptionalPeer('@nestjs-cls/transactional', 'PgQueueModule (option ambientTransactions)', '^3.0.0', () => import('@nestjs-cls/transactional'));
    // CommonJS: Node may put its exports on the namespace's default only.
    const cls = ((loaded as { default?: ClsTransactionalModule }).default ?? loaded) as ClsTransactionalModule;
    const token = setting.connectionName === undefined ? cls.TransactionHost : cls.getTransactionHostToken(setting.connectionName);
    try {
      this.host = this.moduleRef.get(token as string, { strict: false }) as TransactionHostLike;
    } catch (error) {
      throw new PgQueueError(AMBIENT_HOST_MISSING(setting.connectionName), { cause: error });
    }
  }

  /** The active transaction's client, or undefined outside one (and when the option is off). */
  current(): TransactionClient | undefined {
    const host = this.host;
    return host?.isTransactionActive() ? (host.tx as TransactionClient) : undefined;
  }
}
