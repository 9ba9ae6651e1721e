import { BadRequestException, Controller, GatewayTimeoutException, Get, NotFoundException, Param, Post, Query, UnprocessableEntityException } from '@nestjs/common';
import { InvalidPayloadError, JobFailedError, JobWaitTimeoutError, QueueService } from 'nestjs-pg-queue';
import { ParseJobIdPipe } from '../jobs/parse-job-id.pipe.js';
import { OrdersSummaries, type OrdersSummary } from '../queues/orders-summary.queue.js';

/** Results, progress and waitFor: start a summary, watch its progress, wait for its result. */
@Controller('reports/summary')
export class SummaryController {
  constructor(private readonly queue: QueueService) {}

  @Post()
  async start(@Query('minutes') minutes = '60', @Query('steps') steps = '20'): Promise<{ jobId: string }> {
    // Digits become numbers; anything else goes as the text it is, so the payload is not yet the queue's type: it
    // is enqueued by the queue's name, and the queue's validator (the same check whoever enqueues) refuses it by
    // field ("minutes must be an integer from 1 to 10080, got "abc"").
    const value = (text: string): number | string => (/^-?\d{1,15}$/.test(text) ? Number(text) : text);
    try {
      return { jobId: await this.queue.enqueue(OrdersSummaries.name, { minutes: value(minutes), steps: value(steps) }) };
    } catch (error) {
      if (error instanceof InvalidPayloadError) throw new BadRequestException(error.reason);
      throw error;
    }
  }

  /** Where the summary stands: its status and progress now, and its result once completed. */
  @Get(':id')
  async status(@Param('id', ParseJobIdPipe) id: string): Promise<{ id: string; status: string; progress: unknown; result: OrdersSummary | null }> {
    const job = await this.summaryJob(id);
    return { id, status: job.status, progress: job.progress, result: job.result };
  }

  /** Answers once the summary is done (whichever instance runs it), or 504 after `timeoutMs`. */
  @Get(':id/result')
  async result(@Param('id', ParseJobIdPipe) id: string, @Query('timeoutMs') timeoutMs = '10000'): Promise<OrdersSummary | null> {
    // waitFor waits for any job; another queue's job would answer with its own result (or an empty body).
    await this.summaryJob(id);
    try {
      return await this.queue.waitFor<OrdersSummary>(id, { timeoutMs: Math.min(Math.max(Number(timeoutMs) || 10_000, 1), 60_000) });
    } catch (error) {
      if (error instanceof JobWaitTimeoutError) throw new GatewayTimeoutException(error.message);
      if (error instanceof JobFailedError) throw new UnprocessableEntityException(error.message);
      if (error instanceof Error && /no such job/.test(error.message)) throw new NotFoundException(error.message);
      throw error;
    }
  }

  private async summaryJob(id: string) {
    const job = await this.queue.get<unknown, OrdersSummary>(id);
    if (!job) throw new NotFoundException(`summary job ${id} not found (it may have been pruned)`);
    if (job.queue !== OrdersSummaries.name) throw new NotFoundException(`job ${id} is not an orders summary (it is a job of queue ${job.queue})`);
    return job;
  }
}
