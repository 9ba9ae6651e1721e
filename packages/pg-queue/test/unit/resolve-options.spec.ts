import { describe, expect, it } from '@jest/globals';
import { resolveHandlerOptions, resolveModuleOptions } from '../../src/utils/resolve-options.js';

describe('resolveModuleOptions', () => {
  it('fills in defaults: a lease in seconds, heartbeat at a third of it', () => {
    const o = resolveModuleOptions({});
    expect(o).toMatchObject({ leaseMs: 30_000, heartbeatMs: 10_000, workers: true, migrationsRun: true, pollIntervalMs: 30_000 });
    expect(o.maintenance).toEqual({
      enabled: true, sweepIntervalMs: 5_000, pruneIntervalMs: 60_000, completedRetentionMs: 86_400_000,
      failedRetentionMs: 604_800_000, eventRetentionMs: 604_800_000, pruneBatchSize: 5_000, history: null,
    });
    expect(o.workerId).toMatch(/:\d+:[0-9a-f]{6}$/);
    expect(o).toMatchObject({ poolSize: 5, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000, transactionPooler: false });
  });
  it('job logs: 100 lines of 2,000 characters per job by default, or what jobLogs says', () => {
    expect(resolveModuleOptions({}).jobLogs).toEqual({ maxLines: 100, maxLineLength: 2_000 });
    expect(resolveModuleOptions({ jobLogs: { maxLines: 5 } }).jobLogs).toEqual({ maxLines: 5, maxLineLength: 2_000 });
  });
  it('takes the queue pool size from poolSize, or from connection.poolSize', () => {
    expect(resolveModuleOptions({ connection: { url: 'postgres://h/d', poolSize: 2 } }).poolSize).toBe(2);
    expect(resolveModuleOptions({ poolSize: 7, connection: { url: 'postgres://h/d', poolSize: 2 } }).poolSize).toBe(7);
  });
  it.each([
    [{ leaseMs: 999 }, 'leaseMs=999'],
    [{ shutdownGraceMs: -1 }, 'shutdownGraceMs=-1'],
    [{ workers: 'yes' }, 'workers="yes": expected true or false'],
    [{ maintenance: { sweepIntervalMs: 1.5 } }, 'maintenance option sweepIntervalMs=1.5'],
    [{ queues: { 'bad name': {} } }, 'Invalid queue name "bad name"'],
    [{ workerId: '' }, 'workerId=""'],
    [{ poolSize: 0 }, 'poolSize=0'],
    [{ leasePoolSize: 0 }, 'leasePoolSize=0: expected an integer from 1 to 100'],
    [{ leasePoolSize: 2.5 }, 'leasePoolSize=2.5'],
    [{ maintenancePoolSize: 101 }, 'maintenancePoolSize=101: expected an integer from 1 to 100'],
    [{ maintenancePoolSize: '1' }, 'maintenancePoolSize="1"'],
    [{ statementTimeoutMs: -1 }, 'statementTimeoutMs=-1'],
    [{ transactionPooler: 'yes' }, 'transactionPooler="yes": expected true or false'],
    [{ transactionPooler: true }, /transactionPooler is true but listenerUrl is not set.*LISTEN.*migrations/],
    [{ maintenance: { pruneBatchSize: 50_001 } }, 'pruneBatchSize=50001: expected an integer from 1 to 50000'],
    [{ maintenance: { eventRetentionMs: -1 } }, 'maintenance option eventRetentionMs=-1'],
    [{ maintenance: { eventRetentionMs: '7d' } }, 'maintenance option eventRetentionMs="7d"'],
    [{ jobLogs: { maxLines: 0 } }, 'Invalid PgQueueModule jobLogs option maxLines=0: expected an integer from 1 to 10000'],
    [{ jobLogs: { maxLines: 2.5 } }, 'jobLogs option maxLines=2.5'],
    [{ jobLogs: { maxLineLength: 100_001 } }, 'jobLogs option maxLineLength=100001: expected an integer from 1 to 100000'],
    [{ jobLogs: { maxLength: 10 } }, 'Unknown PgQueueModule jobLogs option "maxLength"; known options: maxLines, maxLineLength.'],
    [{ jobLogs: 100 }, 'option jobLogs=100: expected { maxLines, maxLineLength }'],
  ])('refuses %p', (options, message) => {
    expect(() => resolveModuleOptions(options as never)).toThrow(message);
  });
});

describe('resolveHandlerOptions', () => {
  it('defaults batchSize to concurrency + prefetch, at most 100, for a fixed prefetch', () => {
    expect(resolveHandlerOptions('q', { concurrency: 7, prefetch: 0 }).batchSize).toBe(7);
    expect(resolveHandlerOptions('q', { concurrency: 7, prefetch: 20 }).batchSize).toBe(27);
    expect(resolveHandlerOptions('q', { concurrency: 500, prefetch: 0 }).batchSize).toBe(100);
  });
  it("defaults prefetch to 'auto', with claims of up to 500", () => {
    expect(resolveHandlerOptions('q', {})).toMatchObject({ prefetch: 'auto', batchSize: 500 });
    expect(resolveHandlerOptions('q', { prefetch: 'auto', batchSize: 50 })).toMatchObject({ prefetch: 'auto', batchSize: 50 });
  });
  it('never reads ahead on a queue with a limit across instances', () => {
    expect(resolveHandlerOptions('q', { globalConcurrency: 2 })).toMatchObject({ prefetch: 0, batchSize: 10 });
    expect(resolveHandlerOptions('q', { rateLimit: { max: 5, intervalMs: 1_000 } }).prefetch).toBe(0);
    expect(resolveHandlerOptions('q', { concurrencyPerKey: 1, prefetch: 0 }).prefetch).toBe(0);
    expect(() => resolveHandlerOptions('q', { concurrencyPerKey: 1, prefetch: 'auto' })).toThrow(/sets prefetch with a limit across instances/);
    // Fair share alone reads ahead (its claim holds the jobs past the free slots in the shares); with a cap it does not.
    expect(resolveHandlerOptions('q', { fairness: true }).prefetch).toBe('auto');
    expect(resolveHandlerOptions('q', { fairness: true, prefetch: 5 }).prefetch).toBe(5);
    expect(resolveHandlerOptions('q', { fairness: true, concurrencyPerKey: 2 }).prefetch).toBe(0);
  });
  it.each([
    [{ prefetch: -1 }, `prefetch=-1: expected 'auto' or an integer from 0 to 10000`],
    [{ prefetch: 'yes' }, `prefetch="yes": expected 'auto' or an integer`],
    [{ prefetch: 1.5 }, 'prefetch=1.5'],
    [{ prefetch: null }, 'prefetch=null'],
    [{ maxAttempts: 0 }, 'maxAttempts=0'],
    [{ timeoutMs: 0 }, 'timeoutMs=0'],
    [{ backoff: 5 }, 'backoff=5: expected a function'],
    [{ backoff: { baseMs: -5 } }, 'backoff.baseMs=-5'],
  ])('refuses %p', (options, message) => {
    expect(() => resolveHandlerOptions('q', options as never)).toThrow(message);
  });
});
