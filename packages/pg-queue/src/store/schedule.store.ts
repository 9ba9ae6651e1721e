import type { Pool, PoolClient, QueryResultRow } from 'pg';
import { inTransaction } from './in-transaction.js';
import type { MissedFiresPolicy } from '../recurring/fire-times.js';
import type { ScheduleInfo } from '../interfaces/recurring-job.interface.js';
import { SCHEDULE_SQL } from './schedule.sql.js';

/** A schedule as stored, validated (recurring/resolve-schedule.ts), ready to write. */
export interface ScheduleDefinition {
  name: string;
  queue: string;
  cron: string;
  timeZone: string;
  /** The payload object as JSON; each fire's job gets it plus `_schedule`. */
  payloadJson: string;
  missed: MissedFiresPolicy;
  priority: number;
  /** Stored on each fired job; null: the queue's default at fire time, as at enqueue. */
  maxAttempts: number | null;
}

/** A due schedule, as the tick reads it. */
export interface DueSchedule {
  name: string;
  queue: string;
  cron: string;
  timeZone: string;
  payload: Record<string, unknown>;
  missed: MissedFiresPolicy;
  priority: number;
  maxAttempts: number | null;
  revision: string;
  nextFireMs: number;
  /** Where the scan is: this row's next_fire_at, exactly as stored (text), and its name. */
  key: DueKey;
}

/** A keyset position in the due schedules (next_fire_at, name). */
export interface DueKey {
  at: string;
  name: string;
}

export interface DueScan {
  due: DueSchedule[];
  /** The database clock at the scan (epoch ms). */
  nowMs: number;
  /** ms until the next live fire after the due ones; null when no schedule is waiting. */
  nextInMs: number | null;
}

/** background_schedules, one method per statement (store/schedule.sql.ts). */
export class ScheduleStore {
  constructor(
    private readonly pool: Pool,
    private readonly options: { transactionPooler?: boolean } = {},
  ) {}

  private async run<R extends QueryResultRow>(name: keyof typeof SCHEDULE_SQL, values: unknown[], client?: Pool | PoolClient): Promise<R[]> {
    const query = this.options.transactionPooler ? { text: SCHEDULE_SQL[name], values } : { name: `pgq_s_${name}`, text: SCHEDULE_SQL[name], values };
    return (await (client ?? this.pool).query<R>(query)).rows;
  }

  async dbNowMs(): Promise<number> {
    const [row] = await this.run<{ now_ms: number }>('dbNow', []);
    return row.now_ms;
  }

  /** Up to `limit` due schedules, in (next_fire_at, name) order, after `after` when given. */
  async dueSchedules(orphanAfterMs: number, limit: number, after?: DueKey): Promise<DueScan> {
    const rows = await this.run<DueRow>('dueSchedules', [orphanAfterMs, limit, after?.at ?? null, after?.name ?? null]);
    const scan: DueScan = { due: [], nowMs: 0, nextInMs: null };
    for (const r of rows) {
      if (r.name === null) {
        scan.nowMs = r.now_ms!;
        scan.nextInMs = r.next_in_ms;
        continue;
      }
      scan.due.push({
        name: r.name,
        queue: r.queue_name,
        cron: r.cron,
        timeZone: r.time_zone,
        payload: r.payload,
        missed: toPolicy(r.missed_fires, r.missed_window_ms),
        priority: r.priority,
        maxAttempts: r.max_attempts,
        revision: r.revision,
        // Rounded: the compare-and-set sends it back as a timestamp, and a float a hair under the ms would never match.
        nextFireMs: Math.round(r.next_fire_ms),
        key: { at: r.next_fire_key, name: r.name },
      });
    }
    return scan;
  }

  /**
   * Claims one planned fire of a schedule and, in the same transaction, inserts its jobs (`insert`, given the
   * connection). False when another instance claimed it first or the schedule changed since the scan: nothing
   * is written then.
   */
  async claimFire(
    due: Pick<DueSchedule, 'name' | 'nextFireMs' | 'revision'>,
    nextFireAtMs: number,
    lastFireAtMs: number | null,
    insert: (client: PoolClient) => Promise<unknown>,
  ): Promise<boolean> {
    return inTransaction(this.pool, async (client) => {
      const rows = await this.run('claimFire', [due.name, new Date(due.nextFireMs), due.revision, new Date(nextFireAtMs), lastFireAtMs === null ? null : new Date(lastFireAtMs)], client);
      if (rows.length === 0) return false;
      await insert(client);
      return true;
    });
  }

  /** Upserts the schedules this instance declares in code, in one statement; returns how many rows were new. */
  async syncCodeSchedules(definitions: ScheduleDefinition[], nextFireAtMs: Map<string, number>): Promise<number> {
    const records = definitions.map((d) => ({
      ...definitionColumns(d),
      payload: JSON.parse(d.payloadJson) as unknown,
      next_fire_at: new Date(nextFireAtMs.get(d.name)!).toISOString(),
    }));
    const rows = await this.run<{ name: string; inserted: boolean }>('syncCodeSchedules', [JSON.stringify(records)]);
    return rows.filter((r) => r.inserted).length;
  }

  async touchDeclared(names: string[]): Promise<void> {
    await this.run('touchDeclared', [names]);
  }

  async upsertSchedule(d: ScheduleDefinition, nextFireAtMs: number): Promise<ScheduleInfo> {
    const c = definitionColumns(d);
    const [row] = await this.run<ScheduleRow>('upsertSchedule', [
      c.name, c.queue_name, c.cron, c.time_zone, d.payloadJson, c.missed_fires, c.missed_window_ms, c.priority, c.max_attempts, new Date(nextFireAtMs),
    ]);
    return toInfo({ ...row, orphaned: false });
  }

  async deleteSchedule(name: string): Promise<boolean> {
    return (await this.run('deleteSchedule', [name])).length > 0;
  }

  async pauseSchedule(name: string): Promise<boolean> {
    return (await this.run('pauseSchedule', [name])).length > 0;
  }

  /** False when the schedule is gone or changed since `revision` was read. */
  async resumeSchedule(name: string, nextFireAtMs: number, revision: string): Promise<boolean> {
    return (await this.run('resumeSchedule', [name, new Date(nextFireAtMs), revision])).length > 0;
  }

  async getSchedule(name: string, orphanAfterMs: number): Promise<(ScheduleInfo & { revision: string }) | null> {
    const [row] = await this.run<ScheduleRow>('getSchedule', [name, orphanAfterMs]);
    return row ? { ...toInfo(row), revision: row.revision } : null;
  }

  async listSchedules(orphanAfterMs: number): Promise<ScheduleInfo[]> {
    return (await this.run<ScheduleRow>('listSchedules', [orphanAfterMs])).map(toInfo);
  }
}

function definitionColumns(d: ScheduleDefinition) {
  return {
    name: d.name,
    queue_name: d.queue,
    cron: d.cron,
    time_zone: d.timeZone,
    missed_fires: d.missed.policy,
    missed_window_ms: d.missed.policy === 'window' ? d.missed.windowMs : null,
    priority: d.priority,
    max_attempts: d.maxAttempts,
  };
}

function toPolicy(kind: string, windowMs: string | null): MissedFiresPolicy {
  if (kind === 'window') return { policy: 'window', windowMs: Number(windowMs) };
  return { policy: kind === 'latest' ? 'latest' : 'skip' };
}

/** The columns of a schedule's definition, as both the due-schedules scan and the listings return them. */
interface ScheduleDefinitionColumns {
  queue_name: string;
  cron: string;
  time_zone: string;
  payload: Record<string, unknown>;
  missed_fires: string;
  missed_window_ms: string | null;
  priority: number;
  max_attempts: number | null;
  revision: string;
}

interface DueRow extends ScheduleDefinitionColumns {
  name: string | null;
  next_fire_ms: number;
  next_fire_key: string;
  now_ms: number | null;
  next_in_ms: number | null;
}

interface ScheduleRow extends ScheduleDefinitionColumns {
  name: string;
  paused: boolean;
  next_fire_at: Date;
  last_fire_at: Date | null;
  source: 'code' | 'runtime';
  declared_at: Date | null;
  created_at: Date;
  updated_at: Date;
  orphaned: boolean;
}

function toInfo(r: ScheduleRow): ScheduleInfo {
  const missed = toPolicy(r.missed_fires, r.missed_window_ms);
  return {
    name: r.name,
    queue: r.queue_name,
    cron: r.cron,
    timeZone: r.time_zone,
    payload: r.payload,
    missedFires: missed.policy === 'window' ? { windowMs: missed.windowMs } : missed.policy,
    priority: r.priority,
    maxAttempts: r.max_attempts,
    paused: r.paused,
    nextFireAt: r.next_fire_at,
    lastFireAt: r.last_fire_at,
    source: r.source,
    orphaned: r.orphaned,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}
