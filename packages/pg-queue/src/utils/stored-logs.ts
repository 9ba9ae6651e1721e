import type { JobLogLine } from '../interfaces/job.interface.js';

/** A job's `logs` column as the heartbeat and outcome statements write it (appendLogs in store/shared.sql.ts). */
interface StoredLogs {
  lines?: { attempt: number; at: string; line: string }[];
  /** Every line ever logged, the dropped ones included. */
  total?: number;
}

/**
 * A job's stored lines (README: "Job logs") as `QueueService.get` returns them, oldest first, and how many older ones
 * the bound dropped; no lines for a job that never logged (NULL), or a value of another shape.
 */
export function storedLogs(stored: unknown): { lines: JobLogLine[]; dropped: number } {
  const logs = stored as StoredLogs | null | undefined;
  if (logs === null || typeof logs !== 'object' || !Array.isArray(logs.lines)) return { lines: [], dropped: 0 };
  const lines = logs.lines.map((l) => ({ attempt: Number(l.attempt), at: new Date(l.at), line: String(l.line) }));
  const total = Number(logs.total);
  return { lines, dropped: Number.isFinite(total) ? Math.max(0, total - lines.length) : 0 };
}
