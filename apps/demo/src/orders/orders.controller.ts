import { Body, Controller, Post } from '@nestjs/common';
import { parseOrderInput } from './order-input.js';
import { OrdersService, type PlacedOrder } from './orders.service.js';

@Controller('orders')
export class OrdersController {
  constructor(private readonly orders: OrdersService) {}

  @Post()
  place(@Body() body: unknown): Promise<PlacedOrder> {
    return this.orders.place(parseOrderInput(body));
  }
}
