import { Inject, Injectable, Scope } from '@nestjs/common';
import { ContextIdFactory, REQUEST, type ContextId, type ContextIdStrategy, type HostComponentInfo } from '@nestjs/core';
import { describe, expect, it } from '@jest/globals';
import { JobHandler, QueueService, type Job } from 'nestjs-pg-queue';
import { useTestApp, waitFor } from './support/test-app.js';

/** Durable providers per tenant, as an app keys them for HTTP requests: here the "request" is the Job. */
class TenantStrategy implements ContextIdStrategy<Job<{ tenant: string }>> {
  private readonly tenants = new Map<string, ContextId>();
  attach(contextId: ContextId, job: Job<{ tenant: string }>) {
    const { tenant } = job.payload;
    let tenantId = this.tenants.get(tenant);
    if (!tenantId) this.tenants.set(tenant, (tenantId = ContextIdFactory.create()));
    return { resolve: (info: HostComponentInfo) => (info.isTreeDurable ? tenantId : contextId), payload: { tenant } };
  }
}
// Global to @nestjs/core, which Jest loads afresh for each test file: it applies to this file only.
ContextIdFactory.apply(new TenantStrategy());

let made = 0;
const runs: { jobId: string; tenant: string; client: number; clientTenant: string }[] = [];

@Injectable({ scope: Scope.REQUEST, durable: true })
class TenantClient {
  readonly serial = ++made;
  constructor(@Inject(REQUEST) readonly context: { tenant: string }) {}
}

@Injectable()
class TenantJobs {
  constructor(private readonly client: TenantClient) {}

  @JobHandler('durable-tenants')
  async handle(job: Job<{ tenant: string }>) {
    runs.push({ jobId: job.id, tenant: job.payload.tenant, client: this.client.serial, clientTenant: this.client.context.tenant });
  }
}

describe('request-scoped handlers respect durable providers (ContextIdStrategy gets the Job)', () => {
  const t = useTestApp('durable', { providers: [TenantClient, TenantJobs], queue: { maintenance: { enabled: false } } });

  it('jobs of one tenant share its durable instance; another tenant gets its own', async () => {
    const queue = t.app.get(QueueService);
    const ids = await queue.enqueueMany(['a', 'b', 'a', 'b', 'a', 'b'].map((tenant) => ({ queue: 'durable-tenants', payload: { tenant } })));
    await waitFor('all completed', async () => {
      const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM background_jobs WHERE id = ANY($1::int8[]) AND status = 'completed'`, [ids]);
      return rows[0].n === ids.length;
    });
    expect(runs).toHaveLength(6);
    for (const r of runs) expect(r.clientTenant).toBe(r.tenant);
    const serials = (tenant: string) => new Set(runs.filter((r) => r.tenant === tenant).map((r) => r.client));
    expect(serials('a').size).toBe(1);
    expect(serials('b').size).toBe(1);
    expect([...serials('a')][0]).not.toBe([...serials('b')][0]);
  });
});
