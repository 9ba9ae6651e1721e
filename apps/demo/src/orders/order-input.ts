import { BadRequestException } from '@nestjs/common';

export interface OrderInput {
  email: string;
  item: string;
  amount: number;
}

/** Longest email address SMTP carries (RFC 5321's path limit). */
export const MAX_EMAIL_LENGTH = 254;
/** Longest item name: enough for any product title, small enough that no order swells a summary or an email. */
export const MAX_ITEM_LENGTH = 200;

/**
 * Half a surrogate pair. node-postgres would store it as U+FFFD and the queue refuses it in the email's payload;
 * a NUL, which PostgreSQL's text refuses, is checked beside it: either made the request a 500.
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Refuses only bodies that cannot be stored as given (wrong types, text PostgreSQL cannot hold, too long, an
 * amount with fractions of a cent, which numeric(12, 2) would round away: 0.001 became 0.00). Missing fields
 * pass as empty on purpose: they are business-rule failures, which the service checks inside its transaction
 * (see orderRejection).
 */
export function parseOrderInput(body: unknown): OrderInput {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new BadRequestException('expected a JSON object { email, item, amount }');
  }
  const { email, item, amount } = body as Record<string, unknown>;
  const text = (name: string, value: unknown, maxLength: number): string => {
    if (value === undefined) return '';
    if (typeof value !== 'string') throw new BadRequestException(`${name} must be a string`);
    if (value.includes('\0') || LONE_SURROGATE.test(value)) throw new BadRequestException(`${name} must not contain a NUL character or an unpaired UTF-16 surrogate`);
    const trimmed = value.trim();
    if (trimmed.length > maxLength) throw new BadRequestException(`${name} must be at most ${maxLength} characters (got ${trimmed.length})`);
    return trimmed;
  };
  return { email: text('email', email, MAX_EMAIL_LENGTH), item: text('item', item, MAX_ITEM_LENGTH), amount: parseAmount(amount) };
}

function parseAmount(amount: unknown): number {
  if (amount === undefined) return 0;
  if (typeof amount !== 'number' || !Number.isFinite(amount) || Math.abs(amount) >= 1e9) {
    throw new BadRequestException('amount must be a number below 1,000,000,000');
  }
  // The column keeps cents exactly; refusing finer amounts beats storing another amount than the one asked for.
  if (Number(amount.toFixed(2)) !== amount) throw new BadRequestException(`amount must have at most 2 decimal places (cents), got ${amount}`);
  return amount;
}

/** Why an order cannot be accepted, or undefined when it can. */
export function orderRejection({ email, item, amount }: OrderInput): string | undefined {
  if (!email) return 'email is required';
  if (!/^[^\s@]+@[^\s@]+$/.test(email)) return `"${email}" is not an email address`;
  if (!item) return 'item is required';
  if (!(amount > 0)) return `amount must be greater than 0 (got ${amount})`;
  return undefined;
}
