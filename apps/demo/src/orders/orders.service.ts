import { BadRequestException, Injectable, Logger } from '@nestjs/common';
import { QueueService } from 'nestjs-pg-queue';
import { DataSource } from 'typeorm';
import { Emails } from '../queues/emails.queue.js';
import { Order } from './order.entity.js';
import { orderRejection, type OrderInput } from './order-input.js';

export interface PlacedOrder {
  orderId: string;
  jobId: string;
}

@Injectable()
export class OrdersService {
  private readonly logger = new Logger('Orders');

  constructor(
    private readonly dataSource: DataSource,
    private readonly queue: QueueService,
  ) {}

  /**
   * Saves the order and enqueues its confirmation email in one transaction: both commit, or neither does.
   * With a separate broker (Redis, SQS) one of them can happen without the other.
   */
  async place(input: OrderInput): Promise<PlacedOrder> {
    try {
      const placed = await this.dataSource.transaction(async (manager) => {
        const order = await manager.save(manager.create(Order, input));
        const email = {
          to: order.email,
          subject: `Order #${order.id} confirmed`,
          body: `Thanks for ordering ${order.item} (${order.amount.toFixed(2)}).`,
          orderId: order.id,
        };
        // One confirmation per order, however often this runs (a retried request, a replayed event): the
        // unique key makes a second enqueue return the first job's id instead of adding a job.
        const jobId = await this.queue.enqueue(Emails, email, { manager, uniqueKey: `order-confirmation:${order.id}` });
        // Checked last on purpose: it stands in for whatever fails late in a real transaction (payment
        // declined, stock gone) and shows that the email job already enqueued rolls back with the order.
        const rejection = orderRejection(input);
        if (rejection) throw new BadRequestException(rejection);
        return { orderId: order.id, jobId };
      });
      this.logger.log(`order #${placed.orderId} saved, confirmation email is job ${placed.jobId}`);
      return placed;
    } catch (error) {
      if (error instanceof BadRequestException) this.logger.warn(`order refused (${error.message}): rolled back with its email job`);
      throw error;
    }
  }
}
