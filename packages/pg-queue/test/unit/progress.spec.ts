import { describe, expect, it } from '@jest/globals';
import { stalledLoops } from '../../src/health/progress.js';
import { EventLoopLag } from '../../src/health/event-loop-lag.js';
import { stalledInstances, type InstanceRecord } from '../../src/store/instance.store.js';
import { resolveModuleOptions } from '../../src/utils/resolve-options.js';
import type { ClaimLoopReport } from '../../src/worker/worker-pool.js';

const loop = (queue: string, over: Partial<ClaimLoopReport> = {}): ClaimLoopReport => ({ queue, claimingForMs: 0, ended: false, sinceAnswerMs: 5_000, held: false, idleSlots: 1, ...over });

describe('stalledLoops (readiness: claim-stalled)', () => {
  const due = (queue: string) => queue !== 'idle';
  it('names a queue with due jobs, idle slots, no limit holding it, and no answer for longer than the bound', () => {
    expect(stalledLoops([loop('a')], due, 1_000).map((l) => l.queue)).toEqual(['a']);
  });
  it.each([
    ['no due job', loop('idle')],
    ['every slot busy', loop('a', { idleSlots: 0 })],
    ['a limit holds its claims back on purpose', loop('a', { held: true })],
    ['answered within the bound', loop('a', { sinceAnswerMs: 1_000 })],
  ])('does not name a queue: %s', (_, l) => {
    expect(stalledLoops([l], due, 1_000)).toEqual([]);
  });
});

describe('stalledInstances (doctor, dashboard: alive but not claiming)', () => {
  const instance = (over: Partial<InstanceRecord>, queue: Partial<InstanceRecord['queues'][number]> = {}): InstanceRecord => ({
    id: 'i1', host: 'h', pid: 1, startedAt: new Date(), lastSeenAt: new Date(), live: true, seenMsAgo: 500,
    queues: [{ queue: 'q', concurrency: 2, running: 0, sinceClaimMs: 1_000, idleSlots: 2, claimHeld: false, stalledAfterMs: 1_200, ...queue }],
    ...over,
  });
  it('adds the row age to the time since its last claim, and compares with the instance own bound', () => {
    expect(stalledInstances(['q'], [instance({})])).toEqual([{ id: 'i1', queue: 'q', sinceClaimMs: 1_500, stalledAfterMs: 1_200 }]);
    expect(stalledInstances(['q'], [instance({ seenMsAgo: 100 })])).toEqual([]);
  });
  it.each([
    ['gone (its row expired)', instance({ live: false })],
    ['a queue with no due job', instance({}, { queue: 'other' })],
    ['no idle slot', instance({}, { idleSlots: 0 })],
    ['claims held by a limit', instance({}, { claimHeld: true })],
    ['a row of a version that writes no progress', instance({}, { sinceClaimMs: undefined, stalledAfterMs: undefined })],
  ])('does not name an instance: %s', (_, i) => {
    expect(stalledInstances(['q'], [i])).toEqual([]);
  });
});

describe('health options (validated at boot)', () => {
  it('defaults: claimStalledAfterMs the larger of 60 s and two polls, maxEventLoopLagMs 2 s', () => {
    expect(resolveModuleOptions({}).health).toEqual({ claimStalledAfterMs: 60_000, maxEventLoopLagMs: 2_000 });
    expect(resolveModuleOptions({ pollIntervalMs: 45_000 }).health.claimStalledAfterMs).toBe(90_000);
  });
  it.each([
    [{ health: { claimStalledAfterMs: 30_000 } }, 'Invalid PgQueueModule health option claimStalledAfterMs=30000: expected more than pollIntervalMs (30000)'],
    [{ pollIntervalMs: 500, health: { claimStalledAfterMs: 50 } }, 'claimStalledAfterMs=50: expected an integer from 100'],
    [{ health: { maxEventLoopLagMs: 0 } }, 'Invalid PgQueueModule health option maxEventLoopLagMs=0: expected an integer from 50'],
    [{ health: { maxEventLoopLagMs: '1s' } }, 'maxEventLoopLagMs="1s"'],
    [{ health: { stallMs: 1 } }, 'Unknown PgQueueModule health option "stallMs"'],
    [{ health: 5 }, 'Invalid PgQueueModule option health=5'],
  ])('refuses %j', (options, message) => {
    expect(() => resolveModuleOptions(options as never)).toThrow(message);
  });
});

describe('EventLoopLag', () => {
  it('reads 0 while nobody uses it, and the block under way once it runs', () => {
    const lag = new EventLoopLag();
    expect(lag.worstMs()).toBe(0);
    lag.acquire();
    try {
      const until = performance.now() + 300;
      while (performance.now() < until) {
        // blocked: the sampler's timer is late
      }
      expect(lag.worstMs()).toBeGreaterThanOrEqual(150);
    } finally {
      lag.release();
    }
    expect(lag.worstMs()).toBe(0);
  });
});
