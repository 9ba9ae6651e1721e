import { ConflictException, Controller, Get, HttpCode, NotFoundException, Param, Post } from '@nestjs/common';
import { QueueService, type JobRecord, type JobStatus } from 'nestjs-pg-queue';
import { ParseJobIdPipe } from './parse-job-id.pipe.js';

/** Operator endpoints: look a job up, put a dead letter back, cancel a job that should not run. */
@Controller('jobs')
export class JobsController {
  constructor(private readonly queue: QueueService) {}

  @Get(':id')
  async get(@Param('id', ParseJobIdPipe) id: string): Promise<JobRecord> {
    const job = await this.queue.get(id);
    if (!job) throw new NotFoundException(`job ${id} not found (it may have been pruned)`);
    return job;
  }

  @Post(':id/retry')
  @HttpCode(200)
  async retry(@Param('id', ParseJobIdPipe) id: string): Promise<{ id: string; status: JobStatus }> {
    if (await this.queue.retry(id)) return { id, status: 'queued' };
    // retry() only says no; the row says why.
    const job = await this.queue.get(id);
    if (!job) throw new NotFoundException(`job ${id} not found`);
    throw new ConflictException(`job ${id} is ${job.status}: only failed or cancelled jobs can be retried`);
  }

  @Post(':id/cancel')
  @HttpCode(200)
  async cancel(@Param('id', ParseJobIdPipe) id: string): Promise<{ id: string; status: JobStatus }> {
    const result = await this.queue.cancel(id);
    if (result === 'cancelled') return { id, status: 'cancelled' };
    if (result === 'not-found') throw new NotFoundException(`job ${id} not found`);
    throw new ConflictException(`job ${id} is already ${result}`);
  }
}
