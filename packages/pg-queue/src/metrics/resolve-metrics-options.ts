import type { Registry } from 'prom-client';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { BAD_METRICS_OPTION } from './metrics.messages.js';
import type { PgQueueMetricsOptions } from './pg-queue-metrics-options.interface.js';

export interface ResolvedMetricsOptions {
  prometheus: boolean;
  prefix: string;
  register: Registry | undefined;
  depth: boolean;
  depthCacheMs: number;
  depthExactLimit: number;
  depthTimeoutMs: number;
  durationBuckets: number[];
  claimLatencyBuckets: number[];
  openTelemetry: { meterName: string } | undefined;
}

export const DEFAULT_DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
export const DEFAULT_CLAIM_LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900];
/** Pages a depth estimate samples: a bounded read whatever the table's size (as stats() does). */
export const DEPTH_SAMPLE_PAGES = 1_000;

const KNOWN = new Set<string>([
  'prometheus', 'prefix', 'register', 'depth', 'depthCacheMs', 'depthExactLimit', 'depthTimeoutMs', 'durationBuckets', 'claimLatencyBuckets', 'openTelemetry',
]);
/** Prometheus metric names: [a-zA-Z_:][a-zA-Z0-9_:]*; an empty prefix is allowed. */
const PREFIX_PATTERN = /^([a-zA-Z_:][a-zA-Z0-9_:]*)?$/;
const METER_NAME_PATTERN = /^\S.{0,254}$/;

/** Options with every default filled in; invalid ones fail the boot, naming the option. */
export function resolveMetricsOptions(options: PgQueueMetricsOptions = {}): ResolvedMetricsOptions {
  if (options === null || typeof options !== 'object') throw new PgQueueError(BAD_METRICS_OPTION('(options)', options, 'an object'));
  const unknown = Object.keys(options).find((key) => !KNOWN.has(key));
  if (unknown !== undefined) throw new PgQueueError(BAD_METRICS_OPTION(unknown, (options as Record<string, unknown>)[unknown], `a known option (${[...KNOWN].join(', ')})`));
  const prefix = options.prefix ?? 'pg_queue_';
  if (typeof prefix !== 'string' || !PREFIX_PATTERN.test(prefix)) throw new PgQueueError(BAD_METRICS_OPTION('prefix', prefix, 'letters, digits, _ and : (not starting with a digit)'));
  const register = options.register;
  if (register !== undefined && (register === null || typeof (register as Partial<Registry>).registerMetric !== 'function')) {
    throw new PgQueueError(BAD_METRICS_OPTION('register', register, 'a prom-client Registry'));
  }
  return {
    prometheus: bool('prometheus', options.prometheus, true),
    prefix,
    register,
    depth: bool('depth', options.depth, true),
    depthCacheMs: int('depthCacheMs', options.depthCacheMs, 5_000, 0),
    depthExactLimit: int('depthExactLimit', options.depthExactLimit, 1_000, 1, 10_000_000),
    depthTimeoutMs: int('depthTimeoutMs', options.depthTimeoutMs, 5_000, 1),
    durationBuckets: buckets('durationBuckets', options.durationBuckets, DEFAULT_DURATION_BUCKETS),
    claimLatencyBuckets: buckets('claimLatencyBuckets', options.claimLatencyBuckets, DEFAULT_CLAIM_LATENCY_BUCKETS),
    openTelemetry: openTelemetry(options.openTelemetry),
  };
}

function openTelemetry(value: PgQueueMetricsOptions['openTelemetry']): { meterName: string } | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) return { meterName: 'nestjs-pg-queue' };
  if (value === null || typeof value !== 'object') throw new PgQueueError(BAD_METRICS_OPTION('openTelemetry', value, 'true, false or { meterName }'));
  const unknown = Object.keys(value).find((key) => key !== 'meterName');
  if (unknown !== undefined) throw new PgQueueError(BAD_METRICS_OPTION(`openTelemetry.${unknown}`, (value as Record<string, unknown>)[unknown], 'a known option (meterName)'));
  const meterName = value.meterName ?? 'nestjs-pg-queue';
  if (typeof meterName !== 'string' || !METER_NAME_PATTERN.test(meterName)) throw new PgQueueError(BAD_METRICS_OPTION('openTelemetry.meterName', meterName, 'a non-empty name'));
  return { meterName };
}

function bool(name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new PgQueueError(BAD_METRICS_OPTION(name, value, 'true or false'));
  return value;
}

function int(name: string, value: unknown, fallback: number, min: number, max = 2_147_483_647): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new PgQueueError(BAD_METRICS_OPTION(name, value, `an integer from ${min} to ${max}`));
  }
  return value;
}

function buckets(name: string, value: unknown, fallback: number[]): number[] {
  if (value === undefined) return fallback;
  const ok =
    Array.isArray(value) &&
    value.length > 0 &&
    value.every((b, i) => typeof b === 'number' && Number.isFinite(b) && b > 0 && (i === 0 || b > (value[i - 1] as number)));
  if (!ok) throw new PgQueueError(BAD_METRICS_OPTION(name, value, 'a non-empty array of increasing positive numbers (seconds)'));
  return [...(value as number[])];
}
