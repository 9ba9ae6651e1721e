import { BadRequestException, Controller, HttpCode, Post, Query } from '@nestjs/common';
import { DemoTrafficService, type BurstResult } from './demo-traffic.service.js';

const MAX_BURST = 10_000;

@Controller('demo')
export class DemoController {
  constructor(private readonly traffic: DemoTrafficService) {}

  @Post('burst')
  @HttpCode(202) // accepted: the jobs run later
  burst(@Query('n') n = '50'): Promise<BurstResult> {
    const count = Number(n);
    if (!Number.isInteger(count) || count < 1 || count > MAX_BURST) throw new BadRequestException(`n must be an integer from 1 to ${MAX_BURST}`);
    return this.traffic.burst(count);
  }
}
