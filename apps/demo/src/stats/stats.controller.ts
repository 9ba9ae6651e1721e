import { Controller, Get } from '@nestjs/common';
import { QueueService, type QueueStats } from 'nestjs-pg-queue';

@Controller('stats')
export class StatsController {
  constructor(private readonly queue: QueueService) {}

  /** Per-queue job counts by status; `failed` is the dead letter, retry those with POST /jobs/:id/retry. */
  @Get()
  stats(): Promise<QueueStats> {
    return this.queue.stats();
  }
}
