import { describe, expect, it } from '@jest/globals';
import { createTestJob } from 'nestjs-pg-queue/testing';
import { PendingLogs } from '../../src/worker/job-logs.js';

// The lines one attempt logged and no statement wrote yet (worker/job-logs.ts): bounded, numbered, dated by how long
// they waited, forgotten only once a write that carried them has landed.
describe('PendingLogs', () => {
  it('numbers every call, keeps the newest maxLines, cuts each line at maxLineLength with a marker', () => {
    const logs = new PendingLogs({ maxLines: 3, maxLineLength: 5 });
    expect(logs.entry()).toBeUndefined();
    for (const line of ['one', 'two', 'three', 'four', 'a longer line']) logs.add(line);
    const sent = logs.entry(performance.now())!;
    expect(sent.upTo).toBe(5);
    expect(sent.entry.m).toBe(3);
    expect(sent.entry.l.map(([seq, , text]) => [seq, text])).toEqual([
      [3, 'three'],
      [4, 'four'],
      [5, 'a lon... [truncated]'],
    ]);
  });

  it('sends how long each line waited, and forgets only the lines a landed write carried', () => {
    const logs = new PendingLogs({ maxLines: 10, maxLineLength: 100 });
    logs.add('a');
    logs.add('b');
    const at = performance.now();
    const first = logs.entry(at + 250)!;
    expect(first.entry.l.map(([, ms]) => ms >= 250 && ms < 1_000)).toEqual([true, true]);
    logs.add('c'); // while the write is in flight
    logs.written(first.upTo);
    expect(logs.entry()!.entry.l.map(([seq, , text]) => [seq, text])).toEqual([[3, 'c']]);
    logs.written(3);
    expect(logs.entry()).toBeUndefined();
  });

  it('never throws: a value that is not a string is logged as inspected, storable (no NUL)', () => {
    const logs = new PendingLogs({ maxLines: 10, maxLineLength: 100 });
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    expect(() => logs.add(proxy)).not.toThrow();
    logs.add({ n: 1 });
    logs.add('nul \u0000 here');
    expect(logs.texts().slice(1)).toEqual(['{ n: 1 }', 'nul \\u0000 here']);
  });
});

describe('createTestJob: job.log()', () => {
  it('keeps the lines in memory, bounded as the queue bounds them (loggedLines)', () => {
    const job = createTestJob({});
    job.log('charging');
    job.log('x'.repeat(2_100));
    for (let i = 0; i < 120; i++) job.log(`line ${i}`);
    const lines = job.loggedLines();
    expect(lines).toHaveLength(100);
    expect(lines[0]).toBe('line 20');
    expect(lines.at(-1)).toBe('line 119');
    const fresh = createTestJob({});
    fresh.log('x'.repeat(2_100));
    expect(fresh.loggedLines()).toEqual([`${'x'.repeat(2_000)}... [truncated]`]);
  });
});
