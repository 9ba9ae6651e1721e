import type * as OtelApi from '@opentelemetry/api';
import type { JobMetricsSink } from './job-metrics-sink.interface.js';

import type { OtelApiModule } from '../tracing/otel-api.js';

export type { OtelApiModule };

/** The queue attribute, as OpenTelemetry's messaging semantic conventions name it (the tracing spans use it too). */
export const QUEUE_ATTRIBUTE = 'messaging.destination.name';
/** The duration histogram's outcome attribute: completed or failed. */
export const OUTCOME_ATTRIBUTE = 'pg_queue.job.outcome';

interface Instruments {
  started: OtelApi.Counter;
  completed: OtelApi.Counter;
  failed: OtelApi.Counter;
  dead: OtelApi.Counter;
  duration: OtelApi.Histogram;
  claimLatency: OtelApi.Histogram;
}

/** Attribute objects of one queue, made once (an SDK keys its series by them on every record). */
interface QueueAttributes {
  queue: OtelApi.Attributes;
  completed: OtelApi.Attributes;
  failed: OtelApi.Attributes;
}

/**
 * The OpenTelemetry side: the same measurements as Prometheus's, recorded through the `@opentelemetry/api`
 * meter. The API hands out no proxy meter (unlike tracers): a meter taken before the app registers its
 * MeterProvider would stay a no-op. So the instruments are made from the provider registered at the time of a
 * measurement, and made again when that provider changes (one global read per measurement).
 */
export class OtelMetrics implements JobMetricsSink {
  private provider: OtelApi.MeterProvider | undefined;
  private instruments: Instruments | undefined;
  private readonly attributes = new Map<string, QueueAttributes>();

  constructor(
    private readonly api: OtelApiModule,
    private readonly meterName: string,
    private readonly buckets: { duration: number[]; claimLatency: number[] },
  ) {}

  started(queue: string, claimLatencyMs: number | undefined): void {
    const i = this.current();
    const a = this.of(queue);
    i.started.add(1, a.queue);
    if (claimLatencyMs !== undefined) i.claimLatency.record(Math.max(0, claimLatencyMs) / 1000, a.queue);
  }

  finished(queue: string, outcome: 'completed' | 'failed', durationMs: number): void {
    const i = this.current();
    const a = this.of(queue);
    (outcome === 'completed' ? i.completed : i.failed).add(1, a.queue);
    i.duration.record(durationMs / 1000, outcome === 'completed' ? a.completed : a.failed);
  }

  dead(queue: string): void {
    this.current().dead.add(1, this.of(queue).queue);
  }

  cancelled(): void {}

  leaseLost(): void {}

  private current(): Instruments {
    const provider = this.api.metrics.getMeterProvider();
    if (provider !== this.provider || !this.instruments) {
      this.provider = provider;
      const meter = provider.getMeter(this.meterName);
      const counter = (name: string, description: string) => meter.createCounter(name, { description, unit: '{job}' });
      this.instruments = {
        started: counter('pg_queue.jobs.started', 'Attempts started (handler called) by this instance.'),
        completed: counter('pg_queue.jobs.completed', 'Attempts whose success was written, by this instance.'),
        failed: counter('pg_queue.jobs.failed', 'Failed attempts written by this instance (retried or not).'),
        dead: counter('pg_queue.jobs.dead', 'Jobs whose last attempt failed on this instance (dead-lettered).'),
        duration: meter.createHistogram('pg_queue.job.duration', {
          description: 'Handler run time of attempts on this instance, by outcome.',
          unit: 's',
          advice: { explicitBucketBoundaries: this.buckets.duration },
        }),
        claimLatency: meter.createHistogram('pg_queue.job.claim_latency', {
          description: 'Time from a job being due (run_at) to its claim, by the database clock.',
          unit: 's',
          advice: { explicitBucketBoundaries: this.buckets.claimLatency },
        }),
      };
    }
    return this.instruments;
  }

  private of(queue: string): QueueAttributes {
    let a = this.attributes.get(queue);
    if (!a) {
      a = {
        queue: { [QUEUE_ATTRIBUTE]: queue },
        completed: { [QUEUE_ATTRIBUTE]: queue, [OUTCOME_ATTRIBUTE]: 'completed' },
        failed: { [QUEUE_ATTRIBUTE]: queue, [OUTCOME_ATTRIBUTE]: 'failed' },
      };
      this.attributes.set(queue, a);
    }
    return a;
  }
}
