import { BadRequestException, type PipeTransform } from '@nestjs/common';

const INT8_MAX = 9_223_372_036_854_775_807n;

/**
 * Job ids are bigint text. A malformed id is the client's mistake, so it gets a 400 here instead of the
 * PgQueueError (or, past int8, the database error) it would raise further down.
 */
export class ParseJobIdPipe implements PipeTransform<string, string> {
  transform(value: string): string {
    if (!/^[1-9][0-9]{0,18}$/.test(value) || BigInt(value) > INT8_MAX) {
      throw new BadRequestException(`job id must be a positive 64-bit integer, got "${value}"`);
    }
    return value;
  }
}
