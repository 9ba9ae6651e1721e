import { flowKey, shapeJobs, type FlowPayload } from '../adapters/flow-shapes.js';
import type { BenchPayload } from '../adapters/types.js';
import type { Command, FlowReport, HostStats } from './protocol.js';
import { nowMs } from './clock.js';

/**
 * Counts handler starts. Kept to a counter, two timestamps and an optional array so that recording a
 * job costs the same tiny amount in every system's handler and never shows in the figures.
 */
export class Tracker {
  handled = 0;
  private firstAt: number | null = null;
  private readonly marks = new Map<number, number | null>();
  private latencies: number[] | undefined;
  private peakRss = 0;
  private readonly sampler: NodeJS.Timeout;
  /** Flow jobs (the flows scenario): each job's handler start, and its end with the parents' results it read. */
  private readonly flowStarts = new Map<string, number>();
  private readonly flowEnds = new Map<string, { at: number; read: number }>();
  private duplicateStarts = 0;

  constructor(marks: number[] = []) {
    for (const k of marks) this.marks.set(k, null);
    // Peak RSS: sampled, since a single reading at the end misses what a burst allocated.
    this.sampler = setInterval(() => this.sampleRss(), 200);
    this.sampler.unref();
  }

  readonly onJob = (payload: BenchPayload): void => {
    const now = nowMs();
    this.handled++;
    if (this.firstAt === null) this.firstAt = now;
    if (this.marks.has(this.handled)) this.marks.set(this.handled, now);
    if (this.latencies && payload && typeof payload.t === 'number') this.latencies.push(now - payload.t);
    const flow = payload as Partial<FlowPayload>;
    if (typeof flow.f === 'number' && typeof flow.r === 'string') {
      const key = flowKey(flow.f, flow.r);
      if (this.flowStarts.has(key)) this.duplicateStarts++;
      else this.flowStarts.set(key, now);
    }
  };

  /** Called by a flow job's handler right before it returns (the first end of a job counts). */
  readonly onFlowJobEnd = (payload: FlowPayload, parentsRead: number): void => {
    const key = flowKey(payload.f, payload.r);
    if (!this.flowEnds.has(key)) this.flowEnds.set(key, { at: nowMs(), read: parentsRead });
  };

  /**
   * Job-to-dependent latency of every dependent of flows from..from+flows-1: its start minus the latest end among its
   * parents (the parent that released it). Both read from this process's clock, where every handler ran.
   */
  flowReport(command: Extract<Command, { cmd: 'flow-report' }>): FlowReport {
    const jobs = shapeJobs(command.shape, command.sizes, command.model);
    const latencies: number[] = [];
    let parentsExpected = 0;
    let parentsRead = 0;
    let started = 0;
    for (let f = command.from; f < command.from + command.flows; f++) {
      for (const job of jobs) if (this.flowStarts.has(flowKey(f, job.ref))) started++;
      for (const job of jobs) {
        if (job.parents.length === 0) continue;
        parentsExpected += job.parents.length;
        parentsRead += this.flowEnds.get(flowKey(f, job.ref))?.read ?? 0;
        const start = this.flowStarts.get(flowKey(f, job.ref));
        const released = Math.max(...job.parents.map((ref) => this.flowEnds.get(flowKey(f, ref))?.at ?? NaN));
        if (start !== undefined && Number.isFinite(released)) latencies.push(start - released);
      }
    }
    return { started, duplicateStarts: this.duplicateStarts, parentsExpected, parentsRead, latencies };
  }

  recordLatencies(): number[] {
    this.latencies = [];
    return this.latencies;
  }

  stats(): HostStats {
    const rss = this.sampleRss();
    const { heapUsed, heapTotal } = process.memoryUsage();
    return {
      handled: this.handled,
      firstAt: this.firstAt,
      marks: Object.fromEntries(this.marks),
      rssBytes: rss,
      peakRssBytes: this.peakRss,
      heapUsedBytes: heapUsed,
      heapTotalBytes: heapTotal,
    };
  }

  get peakRssBytes(): number {
    this.sampleRss();
    return this.peakRss;
  }

  close(): void {
    clearInterval(this.sampler);
  }

  private sampleRss(): number {
    const rss = process.memoryUsage.rss();
    if (rss > this.peakRss) this.peakRss = rss;
    return rss;
  }
}
