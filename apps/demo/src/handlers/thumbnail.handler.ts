import { Injectable, Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { JobHandler, type Job } from 'nestjs-pg-queue';
import { Thumbnails, type ThumbnailPayload } from '../queues/thumbnails.queue.js';

/** Share of renders that hang well past the timeout. */
const SLOW_RATE = 0.15;

/**
 * Renders (pretend) thumbnails. Some renders hang: timeoutMs aborts job.signal and fails the attempt, so a
 * stuck job costs one second of a slot, not the slot forever.
 */
@Injectable()
export class ThumbnailHandler {
  private readonly logger = new Logger('Thumbnails');

  @JobHandler(Thumbnails, { concurrency: 2, maxAttempts: 2, timeoutMs: 1_000, backoff: { baseMs: 250 } })
  async render(job: Job<ThumbnailPayload>): Promise<void> {
    const ms = Math.random() < SLOW_RATE ? 3_000 : 100 + Math.random() * 300;
    // Without the signal the sleep would go on after the timeout, holding the CPU or file handles it stands for.
    await sleep(ms, undefined, { signal: job.signal });
    const { imageId, width } = job.payload;
    this.logger.log(`job ${job.id}: image ${imageId} resized to ${width}px in ${Math.round(ms)} ms`);
  }
}
