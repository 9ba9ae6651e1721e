import { describe, expect, it } from '@jest/globals';
import { WakeSender } from '../../src/waking/wake-sender.js';

/** A connection whose sends the test settles by hand, one at a time, in order. */
class ScriptedConnection {
  readonly sent: string[][] = [];
  private waiting: { resolve: () => void; reject: (e: Error) => void }[] = [];
  closed = false;

  send(queues: string[]): Promise<void> {
    this.sent.push([...queues].sort());
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  get inFlight(): number {
    return this.waiting.length;
  }

  succeed(): void {
    this.waiting.shift()!.resolve();
  }

  fail(message: string): void {
    this.waiting.shift()!.reject(new Error(message));
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

class Lines {
  readonly lines: { level: string; message: string }[] = [];
  warn(message: unknown) { this.lines.push({ level: 'warn', message: String(message) }); }
  log(message: unknown) { this.lines.push({ level: 'log', message: String(message) }); }
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

async function waitForSend(connection: ScriptedConnection, sends: number): Promise<void> {
  while (connection.sent.length < sends) await new Promise((resolve) => setTimeout(resolve, 5));
}

describe('WakeSender', () => {
  it('defers the wake-up of an enqueue only while another one of this process is in flight, and none once closed', async () => {
    const sender = new WakeSender(new ScriptedConnection(), new Lines());
    expect(sender.begin()).toBe('trigger'); // alone: the trigger's NOTIFY, one statement
    expect(sender.begin()).toBe('deferred');
    expect(sender.begin()).toBe('deferred');
    sender.end();
    sender.end();
    expect(sender.begin()).toBe('deferred'); // the first is still in flight
    sender.end();
    sender.end();
    expect(sender.begin()).toBe('trigger');
    expect(sender.begin()).toBe('deferred');
    await sender.close();
    expect(sender.begin()).toBe('trigger');
  });

  it('sends at once when idle; with a send in flight, what comes meanwhile rides the next send, as one call', async () => {
    const connection = new ScriptedConnection();
    const sender = new WakeSender(connection, new Lines(), undefined, 0);
    sender.wake(['a']);
    expect(connection.sent).toEqual([['a']]);
    sender.wake(['b']);
    sender.wake(['c', 'b']);
    sender.wake(['a']);
    expect(connection.inFlight).toBe(1); // never two at once
    connection.succeed();
    await tick();
    expect(connection.sent).toEqual([['a'], ['a', 'b', 'c']]);
    connection.succeed();
    await sender.flush();
    expect(connection.sent).toHaveLength(2);
  });

  it('spaces its sends: the first after a quiet spell goes at once, the next waits out the spacing and carries everything since', async () => {
    const connection = new ScriptedConnection();
    // A spacing far longer than the two ticks below can take on a loaded machine (30 ms did not hold in CI: the
    // spacing had passed by the time 'b' came, so 'b' went alone at once).
    const sender = new WakeSender(connection, new Lines(), undefined, 1_000);
    sender.wake(['a']);
    expect(connection.sent).toEqual([['a']]);
    connection.succeed();
    await tick();
    sender.wake(['b']);
    sender.wake(['c']);
    await tick();
    expect(connection.sent).toEqual([['a']]); // within the spacing: not yet
    await waitForSend(connection, 2);
    expect(connection.sent).toEqual([['a'], ['b', 'c']]);
    connection.succeed();
    await sender.flush();
  });

  it('a failed send is retried with backoff, keeps what came meanwhile, and logs the outage once and its end once', async () => {
    const connection = new ScriptedConnection();
    const logger = new Lines();
    const sender = new WakeSender(connection, logger, { min: 1, max: 2 }, 0);
    sender.wake(['a']);
    connection.fail('connection lost');
    sender.wake(['b']);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(connection.sent).toEqual([['a'], ['a', 'b']]);
    connection.fail('still down');
    await new Promise((resolve) => setTimeout(resolve, 20));
    connection.succeed();
    await sender.flush();
    expect(connection.sent).toEqual([['a'], ['a', 'b'], ['a', 'b']]);
    const warnings = logger.lines.filter((l) => l.level === 'warn');
    expect(warnings).toHaveLength(1);
    expect(warnings[0].message).toMatch(/wake-up \(NOTIFY\) after enqueue of queue\(s\) "a" .*failed: .*connection lost/);
    expect(logger.lines.filter((l) => l.level === 'log').map((l) => l.message)).toEqual([expect.stringMatching(/recovered after 2 failed attempt\(s\)/)]);
  });

  it('close sends what is pending, then refuses to defer; a send failing at close is given up with a warning, not retried', async () => {
    const connection = new ScriptedConnection();
    const logger = new Lines();
    const sender = new WakeSender(connection, logger, { min: 60_000, max: 60_000 }, 0);
    sender.wake(['a']);
    connection.fail('down'); // now in a one-minute backoff
    await tick();
    expect(sender.open).toBe(true);
    const closing = sender.close();
    expect(sender.open).toBe(false);
    await tick();
    expect(connection.sent).toEqual([['a'], ['a']]); // the backoff was cut short: one last try
    connection.fail('still down');
    await closing;
    expect(connection.closed).toBe(true);
    expect(logger.lines.at(-1)).toEqual({ level: 'warn', message: expect.stringMatching(/^at shutdown, the wake-up \(NOTIFY\) of queue\(s\) "a" could not be sent: .*still down/) });
  });
});
