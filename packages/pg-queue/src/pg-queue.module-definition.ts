import { ConfigurableModuleBuilder } from '@nestjs/common';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import type { PgQueueModuleExtras, PgQueueModuleOptions } from './interfaces/pg-queue-options.interface.js';
import { TYPEORM_DATA_SOURCE } from './pg-queue.constants.js';

/** Options after validation and defaults (see utils/resolve-options.ts). */
export const RESOLVED_OPTIONS = Symbol('pg-queue:resolved_options');

export const { ConfigurableModuleClass, MODULE_OPTIONS_TOKEN, OPTIONS_TYPE, ASYNC_OPTIONS_TYPE } =
  new ConfigurableModuleBuilder<PgQueueModuleOptions>({ moduleName: 'PgQueue' })
    .setClassMethodName('forRoot')
    .setExtras<PgQueueModuleExtras>({ isGlobal: true, dataSourceName: undefined }, (definition, extras) => ({
      ...definition,
      global: extras.isGlobal,
      providers: [
        ...(definition.providers ?? []),
        // The app's TypeORM DataSource, if TypeOrmModule provides one under this name. Optional injection:
        // apps that pass `dataSource` or `connection` need no TypeOrmModule at all.
        {
          provide: TYPEORM_DATA_SOURCE,
          useFactory: (dataSource?: DataSource) => dataSource,
          inject: [{ token: getDataSourceToken(extras.dataSourceName), optional: true }],
        },
      ],
    }))
    .build();
