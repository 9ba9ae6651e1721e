import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { runAttempt } from '../../src/worker/attempt-runner.js';
import { HeldJob, IllegalTransitionError, NEXT, type HeldState } from '../../src/worker/held-job.js';
import { JobBuffer } from '../../src/worker/job-buffer.js';

function job(id = '1', buffered = true, attempt = 1): HeldJob {
  return new HeldJob('q', { id, payload: {}, attempt, token: '7', maxAttempts: 3, priority: 0, runAtMs: 0, createdAtMs: 0, buffered });
}

/** Walks `path` from a fresh job; returns the state reached, or the error's name. */
function walk(...path: HeldState[]): string {
  const j = job();
  try {
    for (const s of path) j.to(s);
    return j.state;
  } catch (error) {
    return (error as Error).name;
  }
}

describe('HeldJob: one state per held job, moved only along the table', () => {
  it('a claim starts claimed', () => {
    expect(job('1', false)).toMatchObject({ state: 'claimed' });
    expect(job('1', true)).toMatchObject({ state: 'claimed' });
  });

  it('allows the written-down paths', () => {
    expect(walk('running', 'settling', 'written')).toBe('written');
    expect(walk('buffered', 'starting', 'running', 'settling', 'lost')).toBe('lost');
    // Marked ahead of a free slot (StartAhead): it starts when one frees, or leaves without running.
    expect(walk('buffered', 'starting', 'armed', 'running', 'settling', 'written')).toBe('written');
    expect(walk('buffered', 'starting', 'armed', 'given-back')).toBe('given-back');
    expect(walk('buffered', 'starting', 'armed', 'lost')).toBe('lost');
    expect(walk('buffered', 'starting', 'armed', 'cancelled')).toBe('cancelled');
    expect(walk('buffered', 'running')).toBe('IllegalTransitionError');
    expect(walk('buffered', 'given-back')).toBe('given-back');
    expect(walk('buffered', 'lost')).toBe('lost');
    expect(walk('buffered', 'cancelled')).toBe('cancelled');
    expect(walk('running', 'cancelled')).toBe('cancelled');
    expect(walk('running', 'given-back')).toBe('given-back');
    expect(walk('given-back')).toBe('given-back'); // claimed during shutdown
  });

  it('refuses every other move: no second outcome, nothing back from a terminal state, no settle of a job never run', () => {
    expect(walk('buffered', 'settling')).toBe('IllegalTransitionError');
    expect(walk('buffered', 'armed')).toBe('IllegalTransitionError'); // armed only by a mark
    expect(walk('buffered', 'starting', 'armed', 'settling')).toBe('IllegalTransitionError');
    expect(walk('buffered', 'starting', 'armed', 'starting')).toBe('IllegalTransitionError');
    expect(walk('running', 'settling', 'running')).toBe('IllegalTransitionError');
    expect(walk('running', 'settling', 'cancelled')).toBe('IllegalTransitionError');
    expect(walk('running', 'lost', 'settling')).toBe('IllegalTransitionError');
    expect(walk('buffered', 'given-back', 'running')).toBe('IllegalTransitionError');
    expect(walk('running', 'settling', 'written', 'lost')).toBe('IllegalTransitionError');
    expect(() => job().to('written')).toThrow(IllegalTransitionError);
  });
});

const STATES = Object.keys(NEXT) as HeldState[];
const TERMINAL: readonly HeldState[] = ['written', 'given-back', 'lost', 'cancelled'];

/** The shortest path of allowed moves from `claimed` to each state (breadth first over the table). */
function pathsFromClaimed(): Map<HeldState, HeldState[]> {
  const paths = new Map<HeldState, HeldState[]>([['claimed', []]]);
  const queue: HeldState[] = ['claimed'];
  for (let from = queue.shift(); from !== undefined; from = queue.shift()) {
    for (const to of NEXT[from]) {
      if (paths.has(to)) continue;
      paths.set(to, [...paths.get(from)!, to]);
      queue.push(to);
    }
  }
  return paths;
}

/** A fresh job moved to `state` along allowed moves. */
function jobIn(state: HeldState): HeldJob {
  const j = job();
  for (const s of pathsFromClaimed().get(state)!) j.to(s);
  expect(j.state).toBe(state);
  return j;
}

/**
 * The transitions table of docs/concepts.md (The life of a held job): one row per move, `| \`from\` | \`to\` | event |
 * who |`, and one row per terminal state with `—` for its moves.
 */
function documentedMoves(): { moves: Map<HeldState, HeldState[]>; rows: string[][] } {
  const text = readFileSync(fileURLToPath(new URL('../../../../docs/concepts.md', import.meta.url)), 'utf8');
  const section = text.slice(text.indexOf('## The life of a held job'), text.indexOf('\n## ', text.indexOf('## The life of a held job') + 1));
  const rows = section
    .split('\n')
    .filter((line) => /^\| `[a-z-]+` \|/.test(line))
    .map((line) => line.split('|').slice(1, -1).map((cell) => cell.trim()));
  const moves = new Map<HeldState, HeldState[]>();
  for (const [from, to] of rows) {
    const list = moves.get(from.replaceAll('`', '') as HeldState) ?? [];
    if (to !== '—') list.push(to.replaceAll('`', '') as HeldState);
    moves.set(from.replaceAll('`', '') as HeldState, list);
  }
  return { moves, rows };
}

describe('HeldJob: the table of transitions (NEXT), entry by entry', () => {
  it('every state is reachable from claimed, and only the terminal states have no move', () => {
    expect(STATES).toEqual(['claimed', 'buffered', 'starting', 'armed', 'running', 'settling', 'written', 'given-back', 'lost', 'cancelled']);
    expect([...pathsFromClaimed().keys()].sort()).toEqual([...STATES].sort());
    expect(STATES.filter((s) => NEXT[s].length === 0)).toEqual(TERMINAL);
    expect(STATES.filter((s) => NEXT[s].includes(s))).toEqual([]); // no move to itself
    expect(STATES.filter((s) => NEXT[s].includes('claimed'))).toEqual([]); // nothing goes back to claimed
  });

  const allowed = STATES.flatMap((from) => NEXT[from].map((to) => [from, to] as const));
  it.each(allowed)('%s -> %s is allowed', (from, to) => {
    const j = jobIn(from);
    j.to(to);
    expect(j.state).toBe(to);
  });

  const refused = STATES.flatMap((from) => STATES.filter((to) => !NEXT[from].includes(to)).map((to) => [from, to] as const));
  it.each(refused)('%s -> %s throws IllegalTransitionError and leaves the state', (from, to) => {
    const j = jobIn(from);
    expect(() => j.to(to)).toThrow(IllegalTransitionError);
    expect(j.state).toBe(from);
  });

  it('the table lists 24 moves and refuses the other 76', () => {
    expect([allowed.length, refused.length]).toEqual([24, 76]);
  });

  it('docs/concepts.md lists exactly these moves, each with its event and who makes it', () => {
    const { moves, rows } = documentedMoves();
    expect(Object.fromEntries(moves)).toEqual(NEXT);
    for (const row of rows) {
      expect(row).toHaveLength(4);
      if (row[1] !== '—') expect(row[2].length * row[3].length).toBeGreaterThan(0); // an event and a part named
    }
  });
});

describe('JobBuffer', () => {
  it('hands out jobs in claim order and takes out those past their start deadline instead of starting them', () => {
    const b = new JobBuffer(1, 10);
    const [a, c, d] = [job('a'), job('c'), job('d')];
    a.startBy = 100;
    c.startBy = 300;
    d.startBy = 400;
    for (const j of [a, c, d]) b.add(j);
    const expired: HeldJob[] = [];
    expect(b.next(200, expired)).toBe(c);
    expect(expired).toEqual([a]);
    expect(b.size).toBe(1);
    expect(b.next(500, expired)).toBeUndefined();
    expect(expired).toEqual([a, d]);
  });

  it('next(..., may): the next job is taken only if `may` takes it, and the jobs behind it never pass it', () => {
    const b = new JobBuffer(1, 10);
    const [a, last, c] = [job('a'), job('last', true, 3), job('c')];
    for (const j of [a, last, c]) {
      j.startBy = 1_000;
      b.add(j);
    }
    const mayArm = (j: HeldJob) => j.attempt < j.maxAttempts;
    const expired: HeldJob[] = [];
    expect(b.next(0, expired, mayArm)).toBe(a);
    expect(b.next(0, expired, mayArm)).toBeUndefined(); // `last` is on its last attempt: c waits behind it
    expect(b.size).toBe(2);
    expect(b.next(0, expired)).toBe(last);
    expect(b.next(0, expired, mayArm)).toBe(c);
    expect(expired).toEqual([]);
  });

  it('a fixed buffer that aged out behind busy slots refills only after a slot frees', () => {
    const b = new JobBuffer(1, 10);
    const a = job('a');
    a.startBy = 100;
    b.add(a);
    expect(b.readAhead).toBe(10);
    expect(b.review(200, 5_000)).toEqual([a]);
    expect(b.readAhead).toBe(0);
    b.slotFreed();
    expect(b.readAhead).toBe(10);
  });

  it("'auto' gives back its surplus after a job ends: the last claimed first, and nothing while it has no estimate", () => {
    const b = new JobBuffer(1, 'auto');
    for (const id of ['a', 'b', 'c', 'd']) b.add(job(id));
    expect(b.takeSurplus()).toBeUndefined(); // no duration known yet: no estimate, no surplus
    b.auto!.claimed(600, 0); // claims take 600 ms
    b.auto!.jobFinished(1_000); // jobs 1 s: one job covers the claim's round trips, so the read-ahead is 1
    expect(b.auto!.size).toBe(1);
    expect(b.takeSurplus()?.map((j) => j.id)).toEqual(['b', 'c', 'd']); // 4 s of work held: 3 go back
    expect([...b.values()].map((j) => j.id)).toEqual(['a']);
    expect(b.takeSurplus()).toBeUndefined();
    const fixed = new JobBuffer(1, 10);
    fixed.add(job('e'));
    expect(fixed.takeSurplus()).toBeUndefined(); // a fixed prefetch has no estimate to exceed
  });
});

describe('runAttempt: nothing a handler returns or throws escapes', () => {
  const outcome = (handle: () => unknown) =>
    new Promise<{ error: unknown; result: unknown }>((resolve) => runAttempt(handle, job(), (_j, error, result) => resolve({ error, result })));

  it('reports a synchronous throw, a rejection and a result, each from a later microtask', async () => {
    let reported = false;
    runAttempt(() => { throw new Error('sync'); }, job(), () => (reported = true));
    expect(reported).toBe(false);
    expect((await outcome(() => { throw new Error('sync'); })).error).toEqual(new Error('sync'));
    expect((await outcome(() => Promise.reject(new Error('async')))).error).toEqual(new Error('async'));
    expect(await outcome(() => 42)).toEqual({ error: undefined, result: 42 });
    expect((await outcome(() => Promise.reject(undefined))).error).toEqual(new Error('handler rejected with undefined'));
  });

  it('a thenable whose then throws, or whose then getter throws, is a rejection', async () => {
    const boom = new Error('then threw');
    expect((await outcome(() => ({ then: () => { throw boom; } }))).error).toBe(boom);
    expect((await outcome(() => ({ get then() { throw boom; } }))).error).toBe(boom);
  });

  it('a thenable that answers twice counts once; a revoked proxy returned is a rejection', async () => {
    expect(await outcome(() => ({ then: (ok: (v: unknown) => void, no: (e: unknown) => void) => { ok(1); no(new Error('late')); ok(2); } }))).toEqual({ error: undefined, result: 1 });
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    expect((await outcome(() => proxy)).error).toBeInstanceOf(TypeError);
  });

  it('a promise whose own then property throws is awaited through the prototype', async () => {
    const p = Promise.resolve(5);
    Object.defineProperty(p, 'then', { value: () => { throw new Error('own then'); } });
    expect(await outcome(() => p)).toEqual({ error: undefined, result: 5 });
  });
});
