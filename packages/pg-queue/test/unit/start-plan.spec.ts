import { describe, expect, it } from '@jest/globals';
import { armedGoingBack, mayStartAhead, placeClaimed, Slots, stalledFor, StartDeadlines } from '../../src/worker/start-plan.js';

/** Slots of a handler of one job (callSize undefined) with these counts. */
function slots(concurrency: number, counts: Partial<Pick<Slots, 'running' | 'starting' | 'reserved' | 'eager' | 'settling'>> = {}, batchSize = 100): Slots {
  return Object.assign(new Slots(concurrency, batchSize, undefined), counts);
}

describe('Slots.claimWant: how many jobs a claim asks for', () => {
  it('an idle worker asks for its batch, at most its turn (concurrency + read-ahead)', () => {
    expect(slots(10, {}, 20).claimWant(0, 0, 10, false)).toBe(20);
    expect(slots(10, {}, 100).claimWant(0, 0, 10, false)).toBe(20); // the turn caps it
    expect(slots(10, {}, 5).claimWant(0, 0, 10, false)).toBe(5); // the batch caps it
    expect(slots(4, {}, 100).claimWant(0, 0, 0, false)).toBe(4); // no read-ahead: the free slots
  });

  it('every job held counts against the turn: running, starting, armed, reserved, eager, buffered', () => {
    expect(slots(10, { running: 2, starting: 1, reserved: 3, eager: 1 }, 100).claimWant(0, 0, 0, false)).toBe(3);
    expect(slots(10, { running: 2 }, 100).claimWant(2, 0, 0, false)).toBe(6); // 2 armed
    expect(slots(10, { running: 10 }, 100).claimWant(0, 0, 0, false)).toBe(0);
    expect(slots(10, { running: 10 }, 100).claimWant(0, 0, 5, false)).toBe(5); // the read-ahead's room
  });

  it('with jobs in the buffer, a top-up goes only when half a batch fits', () => {
    // concurrency 10, prefetch 10, batch 20: half a batch is 10
    expect(slots(10, {}, 20).claimWant(0, 5, 10, false)).toBe(15);
    expect(slots(10, {}, 20).claimWant(0, 10, 10, false)).toBe(10);
    expect(slots(10, {}, 20).claimWant(0, 11, 10, false)).toBe(0); // 9 fit: not worth a round trip
    expect(slots(10, {}, 20).claimWant(0, 20, 10, false)).toBe(0);
  });

  it("'auto': the batch is at most the turn, so half of it follows the estimate", () => {
    expect(slots(4, {}, 500).claimWant(0, 0, 0, true)).toBe(4);
    expect(slots(4, {}, 500).claimWant(0, 2, 0, true)).toBe(2); // half of a batch of 4
    expect(slots(4, {}, 500).claimWant(0, 3, 0, true)).toBe(0); // 1 < 2
    expect(slots(4, {}, 500).claimWant(0, 3, 0, false)).toBe(0); // fixed: half of 500, never with a buffer
    expect(slots(4, {}, 500).claimWant(0, 0, 96, true)).toBe(100);
  });

  it('back-pressure: no claim while a full turn of outcomes waits to be written', () => {
    expect(slots(10, { settling: 19 }, 20).claimWant(0, 0, 10, false)).toBe(20);
    expect(slots(10, { settling: 20 }, 20).claimWant(0, 0, 10, false)).toBe(0);
    expect(slots(2, { settling: 2 }, 20).claimWant(0, 0, 0, false)).toBe(0);
  });

  it('a batch handler: a full batch for each free call; claims go on while at most one turn of outcomes waits', () => {
    const b = new Slots(2, 100, 10);
    expect(b.claimWant(0, 0, 0, false)).toBe(20);
    b.runningBatches = 1;
    expect(b.claimWant(0, 0, 0, false)).toBe(10);
    b.reserved = 1;
    expect(b.claimWant(0, 0, 0, false)).toBe(0);
    b.runningBatches = 0;
    b.reserved = 0;
    b.settling = 20; // one turn (2 calls of 10): still claims
    expect(b.claimWant(0, 0, 0, false)).toBe(20);
    b.settling = 21;
    expect(b.claimWant(0, 0, 0, false)).toBe(0);
  });
});

describe('Slots.reserve: how many of a claim start now, and how many it marks started ahead', () => {
  it('the free slots are reserved for the jobs that start now; beyond them, up to the depth is armed by the claim', () => {
    const s = slots(4, { running: 1 });
    expect(s.reserve(10, 0, 0, 2)).toEqual({ startNow: 3, armAhead: 2 });
    expect(s.reserved).toBe(3);
  });

  it('no arming ahead with a depth of 0 (no estimate yet) or while jobs wait in the buffer (they go first, through marks)', () => {
    expect(slots(4).reserve(10, 0, 0, 0)).toEqual({ startNow: 4, armAhead: 0 });
    expect(slots(4).reserve(10, 0, 3, 5)).toEqual({ startNow: 4, armAhead: 0 });
  });

  it('jobs already held ahead of the slots (armed, or starting beyond them) count against the depth', () => {
    expect(slots(4, { running: 4 }).reserve(10, 1, 0, 3)).toEqual({ startNow: 0, armAhead: 2 });
    expect(slots(4, { running: 4, starting: 1 }).reserve(10, 1, 0, 3)).toEqual({ startNow: 0, armAhead: 1 });
    expect(slots(4, { running: 4 }).reserve(10, 3, 0, 3)).toEqual({ startNow: 0, armAhead: 0 });
    expect(slots(4, { running: 4 }).reserve(1, 0, 0, 3)).toEqual({ startNow: 0, armAhead: 1 }); // at most what it asks for
  });

  it('eager inserts in flight and the reserved slots of another claim are taken', () => {
    const s = slots(4, { eager: 1, reserved: 1 });
    expect(s.reserve(5, 0, 0, 0)).toEqual({ startNow: 2, armAhead: 0 });
    expect(s.reserved).toBe(3);
  });

  it("a batch handler: every job starts now, in the calls reserved for them (rounded up), none armed", () => {
    const b = new Slots(3, 100, 10);
    expect(b.reserve(25, 0, 0, 5)).toEqual({ startNow: 25, armAhead: 0 });
    expect(b.reserved).toBe(3);
  });
});

describe('Slots: where a held job goes when its start mark, or its eager insert, answers', () => {
  it('eagerSlotFree: a slot free, nothing buffered or armed, outcomes within a turn', () => {
    expect(slots(2).eagerSlotFree(0, 0, 0)).toBe(true);
    expect(slots(2).eagerSlotFree(0, 1, 5)).toBe(false); // buffered jobs go first
    expect(slots(2).eagerSlotFree(1, 0, 0)).toBe(false); // armed jobs too
    expect(slots(2, { running: 1, eager: 1 }).eagerSlotFree(0, 0, 0)).toBe(false);
    expect(slots(2, { starting: 1, reserved: 1 }).eagerSlotFree(0, 0, 0)).toBe(false);
    expect(slots(2, { running: 1 }).eagerSlotFree(0, 0, 0)).toBe(true);
    expect(slots(2, { settling: 2 }).eagerSlotFree(0, 0, 0)).toBe(false);
    expect(slots(2, { settling: 2 }).eagerSlotFree(0, 0, 1)).toBe(true);
  });

  it('slotForStarted: jobs still starting do not keep a started (armed, marked) job from a slot', () => {
    expect(slots(2, { starting: 2 }).slotForStarted()).toBe(true);
    expect(slots(2, { running: 1, reserved: 1 }).slotForStarted()).toBe(false);
    expect(slots(2, { running: 1, eager: 1 }).slotForStarted()).toBe(false);
    expect(slots(2, { running: 1 }).slotForStarted()).toBe(true);
  });

  it('afterMark: refused is lost (whatever else), shutdown gives back, a free slot starts it, else it is armed', () => {
    expect(slots(2).afterMark(false, true, 0)).toBe('lost');
    expect(slots(2).afterMark(false, false, 0)).toBe('lost');
    expect(slots(2).afterMark(true, true, 0)).toBe('give-back');
    expect(slots(2).afterMark(true, false, 0)).toBe('start');
    expect(slots(2, { starting: 5 }).afterMark(true, false, 0)).toBe('start');
    expect(slots(2).afterMark(true, false, 1)).toBe('arm'); // armed jobs go first, in claim order
    expect(slots(2, { running: 2 }).afterMark(true, false, 0)).toBe('arm');
    expect(slots(2, { running: 1, reserved: 1 }).afterMark(true, false, 0)).toBe('arm');
  });

  it('afterEagerInsert: shutdown gives back, too late is a stale claim, a buffered row gets a mark, a started one starts or is armed', () => {
    expect(slots(2).afterEagerInsert(true, false, false, 0)).toBe('give-back');
    expect(slots(2).afterEagerInsert(true, true, true, 0)).toBe('give-back');
    expect(slots(2).afterEagerInsert(false, false, true, 0)).toBe('stale');
    expect(slots(2).afterEagerInsert(false, true, true, 0)).toBe('mark');
    expect(slots(2, { running: 2 }).afterEagerInsert(false, true, true, 0)).toBe('mark'); // its slot was kept for it
    expect(slots(2).afterEagerInsert(false, true, false, 0)).toBe('start');
    expect(slots(2).afterEagerInsert(false, true, false, 1)).toBe('arm');
    expect(slots(2, { running: 1, starting: 1 }).afterEagerInsert(false, true, false, 0)).toBe('arm'); // starting ones count here
  });
});

describe('Slots.nextMark: what the buffer gives next', () => {
  /** Gathers marks as startFromBuffer does (each counts as starting); returns the answers, in order. */
  function gather(s: Slots, armed: number, depth: number, buffered: number): string[] {
    const out: string[] = [];
    for (let next = s.nextMark(armed, depth); next && buffered > 0; next = s.nextMark(armed, depth)) {
      out.push(next);
      s.starting += 1;
      buffered -= 1;
    }
    return out;
  }

  it('free slots first, then up to the depth ahead of them, then nothing', () => {
    expect(gather(slots(3, { running: 1 }), 0, 2, 10)).toEqual(['slot', 'slot', 'ahead', 'ahead']);
    expect(gather(slots(3), 0, 0, 10)).toEqual(['slot', 'slot', 'slot']);
    expect(gather(slots(3), 0, 5, 2)).toEqual(['slot', 'slot']); // the buffer ran out
  });

  it('armed jobs, reserved and eager slots count: they are ahead of the buffer', () => {
    expect(slots(2, { running: 2 }).nextMark(1, 1)).toBeUndefined();
    expect(slots(2, { running: 2 }).nextMark(1, 2)).toBe('ahead');
    expect(slots(2, { reserved: 1, eager: 1 }).nextMark(0, 0)).toBeUndefined();
    expect(slots(2, { reserved: 1 }).nextMark(0, 0)).toBe('slot');
  });

  it('a job on its last attempt is never marked ahead (mayStartAhead)', () => {
    expect(mayStartAhead({ attempt: 1, maxAttempts: 3 })).toBe(true);
    expect(mayStartAhead({ attempt: 2, maxAttempts: 3 })).toBe(true);
    expect(mayStartAhead({ attempt: 3, maxAttempts: 3 })).toBe(false);
    expect(mayStartAhead({ attempt: 1, maxAttempts: 1 })).toBe(false);
  });
});

describe('a claim answered: where each job goes, and its deadlines', () => {
  it('placeClaimed: a buffered row to the buffer, a batch handler\'s to a call, the reserved slots first, then armed', () => {
    expect(placeClaimed(true, false, 3)).toBe('buffer');
    expect(placeClaimed(true, true, 3)).toBe('buffer');
    expect(placeClaimed(false, true, 0)).toBe('batch');
    expect(placeClaimed(false, false, 1)).toBe('start');
    expect(placeClaimed(false, false, 0)).toBe('arm');
    expect(placeClaimed(false, false, -1)).toBe('arm');
  });

  it('StartDeadlines: a buffered job in the first half of the short lease, a started one in the first half of its lease', () => {
    const d = new StartDeadlines(30_000);
    expect([d.bufferLeaseMs, d.marginMs]).toEqual([5_000, 2_500]);
    expect(d.buffered(1_000)).toBe(3_500);
    expect(d.started(1_000)).toBe(16_000);
    expect(d.stale(15_000)).toBe(false);
    expect(d.stale(15_001)).toBe(true);
    const short = new StartDeadlines(2_000); // a short leaseMs shortens the buffer's lease
    expect([short.bufferLeaseMs, short.marginMs]).toEqual([2_000, 1_000]);
    expect(short.buffered(0)).toBe(1_000);
    expect(short.stale(1_001)).toBe(true);
  });
});

describe("the review: which armed jobs go back, and the stall sample", () => {
  const at = (...startBys: number[]) => startBys.map((startBy, i) => ({ id: String(i), startBy }));

  it('armedGoingBack: those past their start deadline, and those beyond the depth (the last armed), in order', () => {
    expect(armedGoingBack(at(100, 200, 300), 150, 5).map((j) => j.id)).toEqual(['0']);
    expect(armedGoingBack(at(500, 500, 500), 150, 1).map((j) => j.id)).toEqual(['1', '2']);
    expect(armedGoingBack(at(500, 100, 500), 150, 3).map((j) => j.id)).toEqual(['1']);
    expect(armedGoingBack(at(500, 100, 500), 150, 2).map((j) => j.id)).toEqual(['1', '2']); // the depth counts places, late ones too
    expect(armedGoingBack(at(500, 500), 150, 0).map((j) => j.id)).toEqual(['0', '1']);
    expect(armedGoingBack(at(500, 500), 500, 2).map((j) => j.id)).toEqual(['0', '1']); // at the deadline: too late
    // Jobs wait in the buffer behind them: none goes back for the depth (the caller passes Infinity), only late ones.
    expect(armedGoingBack(at(500, 100, 500), 150, Infinity).map((j) => j.id)).toEqual(['1']);
    expect(armedGoingBack([], 0, 0)).toEqual([]);
  });

  it('stalledFor: how long no slot freed, only while all are busy and the review came on time', () => {
    expect(stalledFor(true, false, 1_000, 400)).toBe(600);
    expect(stalledFor(false, false, 1_000, 400)).toBeUndefined();
    expect(stalledFor(true, true, 1_000, 400)).toBeUndefined();
    expect(slots(2, { running: 1, starting: 1 }).allBusy()).toBe(true);
    expect(slots(2, { running: 1, reserved: 1 }).allBusy()).toBe(false);
  });
});

describe('claim -> start -> run -> settle, counted', () => {
  it('a claim of 6 at concurrency 2 with depth 2: 2 start, 2 are armed by the claim, 2 buffered; marks refill as slots free', () => {
    const s = new Slots(2, 100, undefined);
    expect(s.claimWant(0, 0, 4, false)).toBe(6);
    const { startNow, armAhead } = s.reserve(6, 0, 0, 2);
    expect({ startNow, armAhead }).toEqual({ startNow: 2, armAhead: 2 });
    // The claim answers: 2 started rows in the 2 reserved slots, 2 started rows beyond them, 2 buffered.
    let slotsLeft = s.reserved;
    s.reserved = 0;
    const places = [false, false, false, false, true, true].map((buffered) => {
      const place = placeClaimed(buffered, false, slotsLeft);
      if (place === 'start') {
        slotsLeft -= 1;
        s.running += 1;
      }
      return place;
    });
    expect(places).toEqual(['start', 'start', 'arm', 'arm', 'buffer', 'buffer']);
    let armed = 2;
    expect(s.nextMark(armed, 2)).toBeUndefined(); // the armed jobs fill the depth: the buffer waits
    expect(s.claimWant(armed, 2, 4, false)).toBe(0);
    // One handler ends: settling, its slot free; the first armed job takes it.
    s.running -= 1;
    s.settling += 1;
    expect(s.slotForStarted()).toBe(true);
    armed -= 1;
    s.running += 1;
    expect(s.slotForStarted()).toBe(false);
    // One buffered job is marked ahead (depth 2, one armed), and armed when its mark lands.
    expect(s.nextMark(armed, 2)).toBe('ahead');
    s.starting += 1;
    expect(s.nextMark(armed, 2)).toBeUndefined();
    s.starting -= 1;
    expect(s.afterMark(true, false, armed)).toBe('arm');
    armed += 1;
    // The outcome is written.
    s.settling -= 1;
    expect({ running: s.running, starting: s.starting, reserved: s.reserved, settling: s.settling, armed }).toEqual({ running: 2, starting: 0, reserved: 0, settling: 0, armed: 2 });
  });
});

describe('Slots.idle: slots with no job in them (readiness: a stalled claim needs idle slots)', () => {
  it('counts neither running, starting, armed nor eager slots; a claim in flight reserves slots it has not filled', () => {
    expect(slots(4).idle(0)).toBe(4);
    expect(slots(4, { running: 1, starting: 1, eager: 1 }).idle(0)).toBe(1);
    expect(slots(4, { running: 2 }).idle(2)).toBe(0);
    expect(slots(4, { reserved: 4 }).idle(0)).toBe(4);
    expect(slots(2, { running: 2 }).idle(1)).toBe(0); // never below 0
  });
  it('a batch handler counts its calls', () => {
    const batch = Object.assign(new Slots(3, 10, 10), { runningBatches: 2 });
    expect(batch.idle(0)).toBe(1);
  });
});
