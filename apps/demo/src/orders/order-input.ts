import { BadRequestException } from '@nestjs/common';

export interface OrderInput {
  email: string;
  item: string;
  amount: number;
}

/**
 * Refuses only bodies that cannot be stored at all (wrong types). Missing fields pass as empty on purpose:
 * they are business-rule failures, which the service checks inside its transaction (see orderRejection).
 */
export function parseOrderInput(body: unknown): OrderInput {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new BadRequestException('expected a JSON object { email, item, amount }');
  }
  const { email, item, amount } = body as Record<string, unknown>;
  if (email !== undefined && typeof email !== 'string') throw new BadRequestException('email must be a string');
  if (item !== undefined && typeof item !== 'string') throw new BadRequestException('item must be a string');
  if (amount !== undefined && (typeof amount !== 'number' || !Number.isFinite(amount) || Math.abs(amount) >= 1e9)) {
    throw new BadRequestException('amount must be a number below 1,000,000,000');
  }
  return { email: email?.trim() ?? '', item: item?.trim() ?? '', amount: amount ?? 0 };
}

/** Why an order cannot be accepted, or undefined when it can. */
export function orderRejection({ email, item, amount }: OrderInput): string | undefined {
  if (!email) return 'email is required';
  if (!/^[^\s@]+@[^\s@]+$/.test(email)) return `"${email}" is not an email address`;
  if (!item) return 'item is required';
  if (!(amount > 0)) return `amount must be greater than 0 (got ${amount})`;
  return undefined;
}
