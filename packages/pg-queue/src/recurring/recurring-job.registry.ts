import { Injectable } from '@nestjs/common';
import type { ScheduleDefinition } from '../store/schedule.store.js';

export interface DeclaredSchedule {
  definition: ScheduleDefinition;
  /** `Class.method`, for logs and errors. */
  declaredBy: string;
}

/** The schedules this app declares with @RecurringJob, filled by the explorer, synced by the RecurringScheduler. */
@Injectable()
export class RecurringJobRegistry {
  private readonly schedules = new Map<string, DeclaredSchedule>();

  add(schedule: DeclaredSchedule): void {
    this.schedules.set(schedule.definition.name, schedule);
  }

  get(name: string): DeclaredSchedule | undefined {
    return this.schedules.get(name);
  }

  all(): DeclaredSchedule[] {
    return [...this.schedules.values()];
  }
}
