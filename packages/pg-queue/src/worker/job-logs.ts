import { inspect } from 'node:util';
import type { LogEntry } from '../store/job-store.types.js';
import { storableText } from '../utils/error-text.js';

/** The bounds of job.log() (the module's `jobLogs` option): lines kept per job, characters kept per line. */
export interface JobLogLimits {
  maxLines: number;
  maxLineLength: number;
}

/** The defaults of the `jobLogs` option: 100 lines per job, 2,000 characters per line. */
export const DEFAULT_JOB_LOG_LIMITS: JobLogLimits = { maxLines: 100, maxLineLength: 2_000 };

/** What one job.log() call keeps until a statement writes it. */
interface PendingLine {
  /** Its number in this attempt's job.log() calls, from 1. */
  seq: number;
  /** performance.now() at the call: the write sends how long ago that was, and the database dates it by its own clock. */
  at: number;
  text: string;
}

/**
 * The lines one attempt logged (job.log(): README, "Job logs") that no statement has written yet: kept in memory, and
 * written by the next heartbeat or by the attempt's outcome, never by a statement of their own. Made on the first
 * call, so an attempt that never logs carries nothing. At most `maxLines` wait (older ones are dropped: the row would
 * keep only the newest `maxLines` anyway), each cut to `maxLineLength` characters. Every call is numbered, and a line
 * is forgotten only once a write that carried it has answered (`written`): the row skips numbers it already holds, so a
 * line sent twice (a beat, then the outcome; a beat whose answer was lost) is stored once.
 */
export class PendingLogs {
  private seq = 0;
  private lines: PendingLine[] = [];

  constructor(private readonly limits: JobLogLimits) {}

  add(line: unknown): void {
    this.seq += 1;
    this.lines.push({ seq: this.seq, at: performance.now(), text: storableText(lineText(line), this.limits.maxLineLength) });
    if (this.lines.length > this.limits.maxLines) this.lines.shift();
  }

  /** The lines to send now, with how long each has waited, and the number of the last; undefined when none waits. */
  entry(now = performance.now()): { entry: LogEntry; upTo: number } | undefined {
    if (this.lines.length === 0) return undefined;
    const l = this.lines.map((p): [number, number, string] => [p.seq, Math.max(0, Math.round(now - p.at)), p.text]);
    return { entry: { m: this.limits.maxLines, l }, upTo: this.lines[this.lines.length - 1].seq };
  }

  /** A write that carried the lines up to number `upTo` landed: they are the row's now. */
  written(upTo: number): void {
    let i = 0;
    while (i < this.lines.length && this.lines[i].seq <= upTo) i++;
    if (i > 0) this.lines.splice(0, i);
  }

  /** The texts waiting (createTestJob's loggedLines: a job with no database behind it keeps them all here). */
  texts(): string[] {
    return this.lines.map((p) => p.text);
  }
}

/** What a job.log() argument reads as: a string as it is, anything else as util.inspect shows it; never throws. */
function lineText(line: unknown): string {
  if (typeof line === 'string') return line;
  try {
    return inspect(line, { depth: 3, breakLength: Infinity });
  } catch {
    try {
      return inspect(line, { depth: 3, breakLength: Infinity, customInspect: false });
    } catch {
      return `[unprintable ${typeof line}]`;
    }
  }
}
