import { Controller, Get } from '@nestjs/common';
import { QueueService, type ScheduleInfo } from 'nestjs-pg-queue';

@Controller('schedules')
export class SchedulesController {
  constructor(private readonly queue: QueueService) {}

  /** Recurring schedules with their next and last fire time. */
  @Get()
  schedules(): Promise<ScheduleInfo[]> {
    return this.queue.schedules();
  }
}
