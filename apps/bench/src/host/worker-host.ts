/**
 * Child-process entry: hosts one system (worker or producer) and runs the commands the benchmark sends
 * over IPC. One system per process keeps each library's memory, timers and event loop to itself: RSS is
 * that library's alone, and nothing one library leaves behind slows the next.
 */
import { loadAdapter } from '../adapters/load-adapter.js';
import { DEFAULTS_ID, type BenchPayload, type RunningSystem } from '../adapters/types.js';
import { nowMs, sleep } from './clock.js';
import type { Command, Envelope, FeedResult, Reply, TimedResult } from './protocol.js';
import { memoryAfterGc } from './memory.js';
import { Tracker } from './tracker.js';

let system: RunningSystem | undefined;
let tracker = new Tracker();
let nextIndex = 0;
/** Start latencies being recorded for jobs another process stamps (latency-samples). */
let latencySamples: number[] | undefined;

function payloads(n: number): BenchPayload[] {
  return Array.from({ length: n }, () => ({ i: nextIndex++ }));
}

async function timed(n: number, work: () => Promise<void>): Promise<TimedResult> {
  const started = nowMs();
  await work();
  return { ms: nowMs() - started, n };
}

async function handle(command: Command): Promise<unknown> {
  switch (command.cmd) {
    case 'start': {
      tracker = new Tracker(command.marks);
      const adapter = await loadAdapter(command.system);
      system = await adapter.start({
        ...command,
        onJob: tracker.onJob,
        librarySettings: command.system === DEFAULTS_ID ? 'defaults' : 'tuned',
        onFlowJobEnd: command.flows ? tracker.onFlowJobEnd : undefined,
      });
      return tracker.stats();
    }
    case 'enqueue-sequential': {
      const until = command.forMs === undefined ? Infinity : nowMs() + command.forMs;
      let n = 0;
      const result = await timed(0, async () => {
        for (; n < command.n && nowMs() < until; n++) await running().enqueue({ i: nextIndex++ });
      });
      return { ...result, n };
    }
    case 'enqueue-concurrent': {
      const per = Math.ceil(command.n / command.callers);
      return timed(per * command.callers, async () => {
        await Promise.all(
          Array.from({ length: command.callers }, async () => {
            for (let i = 0; i < per; i++) await running().enqueue({ i: nextIndex++ });
          }),
        );
      });
    }
    case 'enqueue-bulk':
      return timed(command.n, async () => {
        for (let done = 0; done < command.n; done += command.batch) {
          await enqueueWithIds(Math.min(command.batch, command.n - done));
        }
      });
    case 'enqueue-keyed': {
      const all = command.groups.flatMap((g) => Array.from({ length: g.n }, () => ({ i: nextIndex++, k: g.key })));
      return timed(all.length, async () => {
        for (let done = 0; done < all.length; done += command.batch) {
          const chunk = all.slice(done, done + command.batch);
          const ids = await running().enqueueMany(chunk);
          if (ids !== chunk.length) throw new Error(`bulk enqueue of ${chunk.length} jobs returned ${ids} ids`);
        }
      });
    }
    case 'latency': {
      // One job every intervalMs on a fixed schedule (not intervalMs after the previous call returned),
      // each stamped just before its enqueue call; the handler subtracts the stamp from its start time.
      const samples = tracker.recordLatencies();
      const before = tracker.handled;
      const t0 = nowMs();
      for (let i = 0; i < command.n; i++) {
        const wait = t0 + i * command.intervalMs - nowMs();
        if (wait > 0) await sleep(wait);
        await running().enqueue({ i: nextIndex++, t: nowMs() });
      }
      const deadline = nowMs() + command.timeoutMs;
      while (tracker.handled - before < command.n && nowMs() < deadline) await sleep(5);
      return samples.slice();
    }
    case 'enqueue-stamped': {
      const t0 = nowMs();
      for (let i = 0; i < command.n; i++) {
        const wait = t0 + i * command.intervalMs - nowMs();
        if (wait > 0) await sleep(wait);
        await running().enqueue({ i: nextIndex++, t: nowMs() });
      }
      return command.n;
    }
    case 'latency-samples': {
      if (command.begin) {
        latencySamples = tracker.recordLatencies();
        return [];
      }
      const samples = latencySamples ?? [];
      const deadline = nowMs() + command.timeoutMs;
      while (samples.length < command.n && nowMs() < deadline) await sleep(5);
      latencySamples = undefined;
      return samples.slice();
    }
    case 'feed': {
      // Steady state: the app enqueues in bulk while it processes, keeping a backlog of one to two waves.
      const started = nowMs();
      const base = tracker.handled;
      let enqueued = 0;
      const deadline = started + command.timeoutMs;
      while (enqueued < command.total && nowMs() < deadline) {
        if (enqueued - (tracker.handled - base) < command.wave) {
          const n = Math.min(command.chunk, command.total - enqueued);
          await enqueueWithIds(n);
          enqueued += n;
        } else {
          await sleep(5);
        }
      }
      while (tracker.handled - base < command.total && nowMs() < deadline) await sleep(5);
      const result: FeedResult = { ms: nowMs() - started, n: tracker.handled - base, peakRssBytes: tracker.peakRssBytes };
      return result;
    }
    case 'enqueue-flows': {
      // Flows are independent: `callers` loops, each enqueueing one flow per call, as many app requests would.
      const enqueueFlow = running().enqueueFlow;
      if (!enqueueFlow) throw new Error('this system has no flows');
      const end = command.from + command.flows;
      let next = command.from;
      return timed(command.flows, async () => {
        await Promise.all(
          Array.from({ length: command.callers }, async () => {
            for (let f = next++; f < end; f = next++) await enqueueFlow(command.shape, command.sizes, f);
          }),
        );
      });
    }
    case 'flow-report':
      return tracker.flowReport(command);
    case 'stats':
      return tracker.stats();
    case 'memory':
      return memoryAfterGc();
    case 'stop': {
      await system?.stop();
      system = undefined;
      tracker.close();
      return tracker.stats();
    }
  }
}

/** One bulk call; a library that returned fewer ids than it was given jobs fails the scenario. */
async function enqueueWithIds(n: number): Promise<void> {
  const ids = await running().enqueueMany(payloads(n));
  if (ids !== n) throw new Error(`bulk enqueue of ${n} jobs returned ${ids} ids`);
}

function running(): RunningSystem {
  if (!system) throw new Error('system not started');
  return system;
}

function reply(message: Reply): void {
  process.send?.(message);
}

process.on('message', (message: Envelope) => {
  handle(message).then(
    (result) => {
      reply({ id: message.id, ok: true, result });
      if (message.cmd === 'stop') process.disconnect();
    },
    (error: unknown) => reply({ id: message.id, ok: false, error: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
  );
});

// The parent going away (crash, Ctrl-C) must not leave a worker polling a dropped database.
process.on('disconnect', () => {
  setTimeout(() => process.exit(0), 2_000).unref();
  void system?.stop().finally(() => process.exit(0));
});
