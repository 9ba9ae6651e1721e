import { BadRequestException, Controller, GatewayTimeoutException, Get, NotFoundException, Param, Post, Query, UnprocessableEntityException } from '@nestjs/common';
import { JobFailedError, JobWaitTimeoutError, QueueService } from 'nestjs-pg-queue';
import { ParseJobIdPipe } from '../jobs/parse-job-id.pipe.js';
import type { OrdersSummary, OrdersSummaryPayload } from './orders-summary.handler.js';

/** Results, progress and waitFor: start a summary, watch its progress, wait for its result. */
@Controller('reports/summary')
export class SummaryController {
  constructor(private readonly queue: QueueService) {}

  @Post()
  async start(@Query('minutes') minutes = '60', @Query('steps') steps = '20'): Promise<{ jobId: string }> {
    const payload = { minutes: Number(minutes), steps: Number(steps) };
    if (!Number.isInteger(payload.minutes) || payload.minutes < 1 || payload.minutes > 10_080) throw new BadRequestException('minutes must be an integer from 1 to 10080');
    if (!Number.isInteger(payload.steps) || payload.steps < 1 || payload.steps > 100) throw new BadRequestException('steps must be an integer from 1 to 100');
    return { jobId: await this.queue.enqueue<OrdersSummaryPayload>('orders-summary', payload) };
  }

  /** Where the summary stands: its status and progress now, and its result once completed. */
  @Get(':id')
  async status(@Param('id', ParseJobIdPipe) id: string): Promise<{ id: string; status: string; progress: unknown; result: OrdersSummary | null }> {
    const job = await this.queue.get<OrdersSummaryPayload, OrdersSummary>(id);
    if (!job || job.queue !== 'orders-summary') throw new NotFoundException(`summary job ${id} not found`);
    return { id, status: job.status, progress: job.progress, result: job.result };
  }

  /** Answers once the summary is done (whichever instance runs it), or 504 after `timeoutMs`. */
  @Get(':id/result')
  async result(@Param('id', ParseJobIdPipe) id: string, @Query('timeoutMs') timeoutMs = '10000'): Promise<OrdersSummary | null> {
    try {
      return await this.queue.waitFor<OrdersSummary>(id, { timeoutMs: Math.min(Math.max(Number(timeoutMs) || 10_000, 1), 60_000) });
    } catch (error) {
      if (error instanceof JobWaitTimeoutError) throw new GatewayTimeoutException(error.message);
      if (error instanceof JobFailedError) throw new UnprocessableEntityException(error.message);
      if (error instanceof Error && /no such job/.test(error.message)) throw new NotFoundException(error.message);
      throw error;
    }
  }
}
