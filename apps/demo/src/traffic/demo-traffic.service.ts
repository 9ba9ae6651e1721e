import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { QueueService, type JobSpec } from 'nestjs-pg-queue';
import { DEMO_OPTIONS, type ResolvedDemoOptions } from '../demo-options.js';
import { Emails, type EmailPayload } from '../queues/emails.queue.js';
import { Sync, type SyncPayload } from '../queues/sync.queue.js';
import { Thumbnails, type ThumbnailPayload } from '../queues/thumbnails.queue.js';

export interface BurstResult {
  enqueued: number;
  byQueue: Record<string, number>;
  firstJobId: string;
  lastJobId: string;
}

/** Generates work for the demo's queues, so that there is something to watch without writing a client. */
@Injectable()
export class DemoTrafficService implements OnApplicationBootstrap {
  private readonly logger = new Logger('Traffic');
  private bursts = 0;

  constructor(
    private readonly queue: QueueService,
    @Inject(DEMO_OPTIONS) private readonly options: ResolvedDemoOptions,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    if (this.options.startBurst > 0) await this.burst(this.options.startBurst);
  }

  /**
   * n jobs spread over emails, sync and thumbnails, in one INSERT (one round trip, one NOTIFY per queue). Jobs are
   * named by their queue's name here (one array, three payload types); each queue's validator still checks them.
   */
  async burst(n: number): Promise<BurstResult> {
    const burst = ++this.bursts;
    const jobs: JobSpec[] = [];
    for (let i = 0; i < n; i++) jobs.push(this.job(burst, i));
    const ids = await this.queue.enqueueMany(jobs);
    const byQueue: Record<string, number> = {};
    for (const job of jobs) byQueue[job.queue] = (byQueue[job.queue] ?? 0) + 1;
    this.logger.log(`burst #${burst}: enqueued ${n} job(s) (${Object.entries(byQueue).map(([q, c]) => `${q} ${c}`).join(', ')}), ids ${ids[0]}..${ids.at(-1)}`);
    return { enqueued: n, byQueue, firstJobId: ids[0], lastJobId: ids.at(-1)! };
  }

  private job(burst: number, i: number): JobSpec {
    const k = Math.floor(i / 3); // index within the job's queue
    switch (i % 3) {
      case 0: {
        // Every other newsletter waits two seconds: delayed jobs are woken by a timer, not by polling.
        return { queue: Emails.name, payload: { to: `reader${k}@example.com`, subject: `Newsletter #${burst}`, body: 'News.' } satisfies EmailPayload, delayMs: k % 2 === 1 ? 2_000 : 0 };
      }
      case 1: {
        // The first record of each burst is one the CRM always refuses: a dead letter shows up every time.
        return { queue: Sync.name, payload: { recordId: burst * 1_000 + k, corrupt: k % 4 === 0 } satisfies SyncPayload };
      }
      default: {
        // Small thumbnails are what users wait for on screen: they go ahead of the large ones.
        const width = k % 2 === 0 ? 128 : 1024;
        return { queue: Thumbnails.name, payload: { imageId: burst * 1_000 + k, width } satisfies ThumbnailPayload, priority: width === 128 ? 10 : 0 };
      }
    }
  }
}
