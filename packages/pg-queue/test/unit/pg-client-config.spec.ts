import { describe, expect, it } from '@jest/globals';
import { listenerClientConfig, queuePoolConfig, settingsOfConnectionOption, settingsOfDataSource } from '../../src/connection/pg-client-config.js';
import { resolveModuleOptions } from '../../src/utils/resolve-options.js';

const token = async () => 'iam-token';
const stream = () => undefined;

describe('connection settings shared by the queue pool and the LISTEN connection', () => {
  const dataSourceSettings = settingsOfDataSource({
    type: 'postgres',
    host: 'db.internal',
    port: 6432,
    username: 'app',
    password: token,
    database: 'shop',
    ssl: { rejectUnauthorized: false },
    extra: { max: 2, stream, options: '-c search_path=shop' },
  });

  it('the pool keeps password functions, ssl and extra, with its own size, name and timeouts', () => {
    const config = queuePoolConfig(dataSourceSettings, resolveModuleOptions({ poolSize: 3, statementTimeoutMs: 5_000, connectTimeoutMs: 700 }));
    expect(config).toMatchObject({
      host: 'db.internal', port: 6432, user: 'app', database: 'shop', ssl: { rejectUnauthorized: false },
      stream, options: '-c search_path=shop', keepAlive: true,
      application_name: 'nestjs-pg-queue api', max: 3, connectionTimeoutMillis: 700,
      statement_timeout: 5_000, idle_in_transaction_session_timeout: 5_000, query_timeout: 7_000,
    });
    expect(config.password).toBe(token);
  });

  it('one pool per role, each named for it and sized by its own option (issue 39 item 5)', () => {
    const resolved = resolveModuleOptions({ poolSize: 4, leasePoolSize: 3, maintenancePoolSize: 2, statementTimeoutMs: 5_000 });
    expect(['api', 'leases', 'maintenance'].map((role) => queuePoolConfig(dataSourceSettings, resolved, role as never))).toEqual([
      expect.objectContaining({ application_name: 'nestjs-pg-queue api', max: 4, statement_timeout: 5_000, password: token }),
      expect.objectContaining({ application_name: 'nestjs-pg-queue leases', max: 3, statement_timeout: 5_000, password: token }),
      expect.objectContaining({ application_name: 'nestjs-pg-queue maintenance', max: 2, statement_timeout: 5_000, password: token }),
    ]);
    const defaults = resolveModuleOptions({});
    expect([defaults.poolSize, defaults.leasePoolSize, defaults.maintenancePoolSize]).toEqual([5, 2, 1]);
  });

  it('behind a transaction pooler the pool sends no startup parameters, only the client-side timeout applies', () => {
    const config = queuePoolConfig(dataSourceSettings, resolveModuleOptions({ transactionPooler: true, listenerUrl: 'postgres://db.internal/shop' }));
    expect(config.statement_timeout).toBeUndefined();
    expect(config.idle_in_transaction_session_timeout).toBeUndefined();
    expect(config.query_timeout).toBe(62_000);
  });

  it('statementTimeoutMs: 0 sets no timeout at all', () => {
    const config = queuePoolConfig(dataSourceSettings, resolveModuleOptions({ statementTimeoutMs: 0 }));
    expect([config.statement_timeout, config.query_timeout]).toEqual([undefined, undefined]);
  });

  it('the listener dials like the pool, or listenerUrl with the same password function, ssl and extra', () => {
    expect(listenerClientConfig(dataSourceSettings, undefined)).toMatchObject({ host: 'db.internal', user: 'app', password: token, ssl: { rejectUnauthorized: false }, stream, keepAlive: true });
    const direct = listenerClientConfig(dataSourceSettings, 'postgres://app@10.0.0.5:5432/shop');
    expect(direct).toMatchObject({ host: '10.0.0.5', port: 5432, user: 'app', database: 'shop', password: token, ssl: { rejectUnauthorized: false }, stream });
    expect(direct).not.toHaveProperty('connectionString'); // node-postgres would let its empty password replace the function
    expect(listenerClientConfig({ connectionString: 'postgres://app:secret@pooler:6432/shop' }, 'postgres://app@primary/shop', 900)).toMatchObject({
      host: 'primary', port: 6432, user: 'app', password: 'secret', database: 'shop', connectionTimeoutMillis: 900,
    });
    expect(direct).not.toHaveProperty('statement_timeout');
  });

  it('the replication master is what the queue dials', () => {
    const settings = settingsOfDataSource({
      type: 'postgres',
      replication: { master: { host: 'primary', username: 'app', password: token, database: 'shop' }, slaves: [{ host: 'replica' }] },
    });
    expect(settings).toMatchObject({ host: 'primary', password: token });
  });

  it('the module’s own connection takes a URL or fields, with a password function', () => {
    expect(settingsOfConnectionOption('postgres://u:p@h/d')).toEqual({ connectionString: 'postgres://u:p@h/d' });
    expect(settingsOfConnectionOption({ host: 'h', password: token, extra: { keepAlive: false } })).toEqual({ host: 'h', password: token, keepAlive: false });
  });
});
