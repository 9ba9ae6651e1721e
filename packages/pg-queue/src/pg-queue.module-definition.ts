import { ConfigurableModuleBuilder } from '@nestjs/common';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import type { PgQueueModuleExtras, PgQueueModuleOptions } from './interfaces/pg-queue-options.interface.js';
import { DATABASE_NAME, DEFAULT_DATABASE, TYPEORM_DATA_SOURCE } from './pg-queue.constants.js';
import { PgQueueCoreModule } from './databases/queue-databases.js';
import { assertDatabaseName } from './utils/resolve-options.js';

export const { ConfigurableModuleClass, MODULE_OPTIONS_TOKEN, OPTIONS_TYPE, ASYNC_OPTIONS_TYPE } =
  new ConfigurableModuleBuilder<PgQueueModuleOptions>({ moduleName: 'PgQueue' })
    .setClassMethodName('forRoot')
    .setExtras<PgQueueModuleExtras>({ isGlobal: true, dataSourceName: undefined, name: undefined }, (definition, extras) => ({
      ...definition,
      global: extras.isGlobal,
      imports: [...(definition.imports ?? []), PgQueueCoreModule],
      providers: [
        ...(definition.providers ?? []),
        // Also what tells two instances' dynamic modules apart (Nest keys a module by its metadata).
        { provide: DATABASE_NAME, useValue: extras.name === undefined ? DEFAULT_DATABASE : assertDatabaseName(extras.name) },
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

