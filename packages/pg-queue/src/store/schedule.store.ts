import type { Pool, PoolClient, QueryResultRow } from 'pg';
import { inTransaction } from './in-transaction.js';
import type { Ended, MissedFiresPolicy } from '../recurring/fire-times.js';
import type { ScheduleInfo } from '../interfaces/recurring-job.interface.js';
import { SCHEDULE_SQL } from './schedule.sql.js';

/** A schedule as stored, validated (recurring/resolve-schedule.ts), ready to write. */
export interface ScheduleDefinition {
  name: string;
  queue: string;
  /** The cron expression, or null for an `every` schedule. */
  cron: string | null;
  /** The fixed interval of an `every` schedule (ms), or null for a cron one. */
  everyMs: number | null;
  timeZone: string;
  /** The payload template as JSON; each fire's job gets it (placeholders replaced) plus `_schedule`. */
  payloadJson: string;
  missed: MissedFiresPolicy;
  priority: number;
  /** Stored on each fired job; null: the queue's default at fire time, as at enqueue. */
  maxAttempts: number | null;
  /** The most fires (null: no limit); startDate and endDate (epoch ms, null: none). */
  limit: number | null;
  startMs: number | null;
  endMs: number | null;
}

/** A due schedule, as the tick reads it. */
export interface DueSchedule {
  name: string;
  queue: string;
  cron: string | null;
  everyMs: number | null;
  timeZone: string;
  payload: Record<string, unknown>;
  missed: MissedFiresPolicy;
  priority: number;
  maxAttempts: number | null;
  limit: number | null;
  /** Fires counted so far (the compare-and-set of a cron fire checks it too). */
  fires: number;
  startMs: number | null;
  endMs: number | null;
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
    const scan: DueScan = { due: [], nowMs: rows[0].now_ms, nextInMs: rows[0].next_in_ms };
    for (const r of rows) {
      if (r.name === null) continue; // nothing due: the clock alone
      scan.due.push({
        name: r.name,
        queue: r.queue_name,
        cron: r.cron,
        everyMs: r.every_ms === null ? null : Number(r.every_ms),
        timeZone: r.time_zone,
        payload: r.payload,
        missed: toPolicy(r.missed_fires, r.missed_window_ms),
        priority: r.priority,
        maxAttempts: r.max_attempts,
        limit: r.fire_limit === null ? null : Number(r.fire_limit),
        fires: Number(r.fires),
        startMs: r.start_ms === null ? null : Math.round(r.start_ms),
        endMs: r.end_ms === null ? null : Math.round(r.end_ms),
        revision: r.revision,
        // Rounded: the compare-and-set sends it back as a timestamp, and a float a hair under the ms would never match.
        nextFireMs: Math.round(r.next_fire_ms),
        key: { at: r.next_fire_key, name: r.name },
      });
    }
    return scan;
  }

  /**
   * Claims one planned fire of a cron schedule (`count` fire times, the latest `lastFireAtMs`) and, in the same
   * transaction, inserts its jobs (`insert`, given the connection). `nextFireAtMs` null ends the schedule. False when
   * another instance claimed it first or the schedule changed since the scan: nothing is written then.
   */
  async claimFire(
    due: Pick<DueSchedule, 'name' | 'nextFireMs' | 'revision' | 'fires'>,
    nextFireAtMs: number | null,
    lastFireAtMs: number | null,
    count: number,
    insert: (client: PoolClient) => Promise<unknown>,
  ): Promise<boolean> {
    return inTransaction(this.pool, async (client) => {
      const rows = await this.run('claimFire', [
        due.name, new Date(due.nextFireMs), due.revision, nextFireAtMs === null ? null : new Date(nextFireAtMs), lastFireAtMs === null ? null : new Date(lastFireAtMs), count, due.fires,
      ], client);
      if (rows.length === 0) return false;
      await insert(client);
      return true;
    });
  }

  /**
   * Claims the due fire of an `every` schedule: the claim makes the fire time (the database clock) and the next
   * fire, and `insert` (given the connection and the fire time) inserts its job in the same transaction. Null when
   * another instance claimed it first or the schedule changed since the scan; `fired` false when its end passed
   * (the schedule ended without a fire).
   */
  async claimEveryFire(
    due: Pick<DueSchedule, 'name' | 'nextFireMs' | 'revision'>,
    insert: (client: PoolClient, fireMs: number) => Promise<unknown>,
  ): Promise<{ fired: boolean; fireMs: number; nextFireAtMs: number | null; fires: number; limit: number | null } | null> {
    return inTransaction(this.pool, async (client) => {
      const [row] = await this.run<{ fire: boolean; fire_ms: number; next_fire_ms: number | null; fires: string; fire_limit: string | null }>(
        'claimEveryFire',
        [due.name, new Date(due.nextFireMs), due.revision],
        client,
      );
      if (!row) return null;
      const fireMs = Math.round(row.fire_ms);
      if (row.fire) await insert(client, fireMs);
      return {
        fired: row.fire,
        fireMs,
        nextFireAtMs: row.next_fire_ms === null ? null : Math.round(row.next_fire_ms),
        fires: Number(row.fires),
        limit: row.fire_limit === null ? null : Number(row.fire_limit),
      };
    });
  }

  /** Upserts the schedules this instance declares in code, in one statement; returns how many rows were new. */
  async syncCodeSchedules(definitions: ScheduleDefinition[], nextFireAtMs: Map<string, number | null>): Promise<number> {
    const records = definitions.map((d) => {
      const next = nextFireAtMs.get(d.name) ?? null;
      const c = definitionColumns(d);
      return {
        ...c,
        start_at: c.start_at?.toISOString() ?? null,
        end_at: c.end_at?.toISOString() ?? null,
        payload: JSON.parse(d.payloadJson) as unknown,
        next_fire_at: next === null ? null : new Date(next).toISOString(),
      };
    });
    const rows = await this.run<{ name: string; inserted: boolean }>('syncCodeSchedules', [JSON.stringify(records)]);
    return rows.filter((r) => r.inserted).length;
  }

  async touchDeclared(names: string[]): Promise<void> {
    await this.run('touchDeclared', [names]);
  }

  /** `nextFireAtMs`: the first fire after now within startDate and endDate (null: none); the statement applies the limit. */
  async upsertSchedule(d: ScheduleDefinition, nextFireAtMs: number | null): Promise<ScheduleInfo> {
    const c = definitionColumns(d);
    const [row] = await this.run<ScheduleRow>('upsertSchedule', [
      c.name, c.queue_name, c.cron, c.every_ms, c.time_zone, d.payloadJson, c.missed_fires, c.missed_window_ms, c.priority, c.max_attempts,
      c.fire_limit, c.start_at, c.end_at, nextFireAtMs === null ? null : new Date(nextFireAtMs),
    ]);
    return toInfo({ ...row, orphaned: false });
  }

  async deleteSchedule(name: string): Promise<boolean> {
    return (await this.run('deleteSchedule', [name])).length > 0;
  }

  async pauseSchedule(name: string): Promise<boolean> {
    return (await this.run('pauseSchedule', [name])).length > 0;
  }

  /** False when the schedule is gone or changed (or fired) since `revision` and `fires` were read. nextFireAtMs null: it has ended. */
  async resumeSchedule(name: string, nextFireAtMs: number | null, revision: string, fires: number): Promise<boolean> {
    return (await this.run('resumeSchedule', [name, nextFireAtMs === null ? null : new Date(nextFireAtMs), revision, fires])).length > 0;
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
    every_ms: d.everyMs,
    time_zone: d.timeZone,
    missed_fires: d.missed.policy,
    missed_window_ms: d.missed.policy === 'window' ? d.missed.windowMs : null,
    priority: d.priority,
    max_attempts: d.maxAttempts,
    fire_limit: d.limit,
    start_at: d.startMs === null ? null : new Date(d.startMs),
    end_at: d.endMs === null ? null : new Date(d.endMs),
  };
}

/** Why a schedule whose next fire is NULL fires no more: its limit, else its end date (the only two ways a row ends). */
export function endedOf(nextFireAt: Date | null, limit: number | null, fires: number): Ended | null {
  if (nextFireAt !== null) return null;
  return limit !== null && fires >= limit ? 'limit' : 'endDate';
}

function toPolicy(kind: string, windowMs: string | null): MissedFiresPolicy {
  if (kind === 'window') return { policy: 'window', windowMs: Number(windowMs) };
  return { policy: kind === 'latest' ? 'latest' : 'skip' };
}

/** The columns of a schedule's definition, as both the due-schedules scan and the listings return them. */
interface ScheduleDefinitionColumns {
  queue_name: string;
  cron: string | null;
  /** int8: text from pg. */
  every_ms: string | null;
  time_zone: string;
  payload: Record<string, unknown>;
  missed_fires: string;
  missed_window_ms: string | null;
  priority: number;
  max_attempts: number | null;
  fire_limit: string | null;
  fires: string;
  revision: string;
}

interface DueRow extends ScheduleDefinitionColumns {
  name: string | null;
  start_ms: number | null;
  end_ms: number | null;
  next_fire_ms: number;
  next_fire_key: string;
  now_ms: number;
  next_in_ms: number | null;
}

interface ScheduleRow extends ScheduleDefinitionColumns {
  name: string;
  start_at: Date | null;
  end_at: Date | null;
  paused: boolean;
  next_fire_at: Date | null;
  last_fire_at: Date | null;
  source: 'code' | 'runtime';
  declared_at: Date | null;
  created_at: Date;
  updated_at: Date;
  orphaned: boolean;
}

function toInfo(r: ScheduleRow): ScheduleInfo {
  const missed = toPolicy(r.missed_fires, r.missed_window_ms);
  const limit = r.fire_limit === null ? null : Number(r.fire_limit);
  const fires = Number(r.fires);
  return {
    name: r.name,
    queue: r.queue_name,
    cron: r.cron,
    every: r.every_ms === null ? null : Number(r.every_ms),
    timeZone: r.time_zone,
    payload: r.payload,
    missedFires: missed.policy === 'window' ? { windowMs: missed.windowMs } : missed.policy,
    priority: r.priority,
    maxAttempts: r.max_attempts,
    limit,
    fires,
    firesLeft: limit === null ? null : Math.max(0, limit - fires),
    startDate: r.start_at,
    endDate: r.end_at,
    paused: r.paused,
    nextFireAt: r.next_fire_at,
    lastFireAt: r.last_fire_at,
    ended: endedOf(r.next_fire_at, limit, fires),
    source: r.source,
    orphaned: r.orphaned,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}
