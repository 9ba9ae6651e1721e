import type { JobEvent, JobEventName, JobEvents } from '../events/job-events.js';
import type { JobMetricsSink } from './job-metrics-sink.interface.js';

/** The events a measurement comes from ('retrying' adds nothing to 'failed'). */
const MEASURED: readonly JobEventName[] = ['active', 'completed', 'failed', 'dead', 'cancelled', 'lease-lost'];

/**
 * The one source of the job metrics: turns this instance's JobEvents into measurements and hands each to every
 * sink (Prometheus, OpenTelemetry). It listens only while it has a sink, so with no metrics exporter on, nobody
 * listens and the workers build no events at all.
 */
export class JobMetricsCollector {
  private unlisten: (() => void)[] | undefined;

  constructor(private readonly sinks: readonly JobMetricsSink[]) {}

  /** Listens to the events of each database's workers (one JobEvents per PgQueueModule). */
  start(sources: readonly JobEvents[]): void {
    if (this.sinks.length === 0 || this.unlisten) return;
    this.unlisten = sources.map((events) => events.listen((event) => this.measure(event), { names: MEASURED }));
  }

  stop(): void {
    for (const unlisten of this.unlisten ?? []) unlisten();
    this.unlisten = undefined;
  }

  private measure(event: JobEvent): void {
    const queue = event.job.queue;
    for (const sink of this.sinks) {
      switch (event.name) {
        case 'active':
          sink.started(queue, event.claimLatencyMs);
          break;
        case 'completed':
        case 'failed':
          sink.finished(queue, event.name, event.durationMs);
          break;
        case 'dead':
          sink.dead(queue);
          break;
        case 'cancelled':
          sink.cancelled(queue);
          break;
        case 'lease-lost':
          sink.leaseLost(queue);
          break;
      }
    }
  }
}
