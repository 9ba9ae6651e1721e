import { describe, expect, it } from '@jest/globals';
import { StartAhead } from '../../src/worker/start-ahead.js';

describe('StartAhead: how many jobs to hold started ahead of a free slot', () => {
  it('arms nothing until a job has finished and a start mark has answered', () => {
    const a = new StartAhead(10);
    expect(a.depth).toBe(0);
    a.jobFinished(0.05);
    expect(a.depth).toBe(0);
    const b = new StartAhead(10);
    b.markAnswered(0.5);
    expect(b.depth).toBe(0);
  });

  it("covers what the slots finish during one mark's round trip (Little's law)", () => {
    const a = new StartAhead(10);
    a.markAnswered(0.5);
    a.jobFinished(1); // 10 slots finish 5 jobs per 0.5 ms mark
    expect(a.depth).toBe(5);
    const noop = new StartAhead(10);
    noop.markAnswered(0.5);
    noop.jobFinished(0.02);
    expect(noop.depth).toBe(250); // a mark of many jobs per round trip: the rate is not bound by concurrency / round trip
  });

  it('arms none for jobs much longer than a round trip (rounded to 0), and stops within a few samples when jobs turn slow', () => {
    const a = new StartAhead(10);
    a.markAnswered(0.5);
    a.jobFinished(50);
    expect(a.depth).toBe(0);
    const b = new StartAhead(4);
    b.markAnswered(1);
    b.jobFinished(0.1);
    expect(b.depth).toBe(40);
    for (let i = 0; i < 8; i++) b.jobFinished(200); // a slower sample moves the estimate half-way each time
    expect(b.depth).toBe(0);
  });

  it('a stall (no slot freed while all were busy) is a sample only when above the estimate', () => {
    const a = new StartAhead(2);
    a.markAnswered(1);
    a.jobFinished(0.1);
    expect(a.depth).toBe(20);
    a.stalled(0.05); // below the estimate: says nothing
    expect(a.depth).toBe(20);
    a.stalled(500);
    a.stalled(500);
    expect(a.depth).toBe(0);
  });
});
