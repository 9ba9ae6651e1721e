import { Controller, Get } from '@nestjs/common';
import { JobEventCounter, type EventCounts } from './job-event-counter.js';

@Controller('events')
export class EventsController {
  constructor(private readonly counter: JobEventCounter) {}

  /** Outcomes this instance's workers saw since it started, per queue and event (from @OnJobEvent). */
  @Get()
  counts(): EventCounts {
    return this.counter.snapshot();
  }
}
