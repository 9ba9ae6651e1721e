import { createHash, timingSafeEqual } from 'node:crypto';
import { PgQueueError } from '../errors/pg-queue.error.js';
import { header, type AnyRequest } from './dashboard-http.js';
import { DASHBOARD_BAD_AUTH_ANSWER, DASHBOARD_BASIC_AUTH_USERS } from './dashboard.messages.js';
import type { DashboardAuthorize, DashboardAuthResult } from './dashboard-options.interface.js';
import type { ResolvedDashboardOptions } from './resolve-dashboard-options.js';

/** Who looks at a page and what they may do. */
export interface Viewer {
  access: 'full' | 'read-only';
  user: string | null;
}

export type AuthOutcome = { viewer: Viewer } | { denied: true; challenge: string | null };

/** The request's access: the hook's answer (a guard already let it through), capped by `readOnly`. */
export async function authorizeRequest(options: ResolvedDashboardOptions, req: AnyRequest): Promise<AuthOutcome> {
  let result: DashboardAuthResult = { access: 'full', user: userOf(req.user) ?? undefined };
  if (options.authorize) {
    const answer = await options.authorize(req);
    result = typeof answer === 'string' ? { access: answer } : answer;
    if (result === null || typeof result !== 'object' || !['full', 'read-only', 'denied'].includes(result.access)) throw new PgQueueError(DASHBOARD_BAD_AUTH_ANSWER(answer));
  }
  if (result.access === 'denied') return { denied: true, challenge: result.challenge ?? null };
  return { viewer: { access: options.readOnly ? 'read-only' : result.access, user: result.user ?? userOf(req.user) } };
}

/** A name for the log from what a guard or middleware put on request.user. */
function userOf(user: unknown): string | null {
  if (typeof user === 'string') return user;
  if (user === null || typeof user !== 'object') return null;
  for (const key of ['username', 'name', 'email', 'id', 'sub']) {
    const value = (user as Record<string, unknown>)[key];
    if (typeof value === 'string' || typeof value === 'number') return String(value);
  }
  return null;
}

export interface BasicAuthUser {
  name: string;
  password: string;
  /** Default 'full'. */
  access?: 'full' | 'read-only';
}

const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/**
 * An auth hook for HTTP basic authentication against a fixed list of users: a request without credentials
 * (or with wrong ones) gets 401 and the browser's login prompt. Use it over HTTPS only: basic auth sends the
 * password with every request.
 */
export function dashboardBasicAuth(options: { users: BasicAuthUser[]; realm?: string }): DashboardAuthorize {
  const users = options?.users;
  if (!Array.isArray(users) || users.length === 0 || users.some((u) => typeof u?.name !== 'string' || !u.name || u.name.includes(':') || typeof u.password !== 'string' || u.password.length < 8)) {
    throw new PgQueueError(DASHBOARD_BASIC_AUTH_USERS());
  }
  const realm = (options.realm ?? 'pg-queue dashboard').replace(/["\\]/g, '');
  const known = users.map((u) => ({ name: u.name, hash: digest(`${u.name}:${u.password}`), access: u.access ?? 'full' }));
  const challenge = `Basic realm="${realm}", charset="UTF-8"`;
  return (req) => {
    const value = header(req as AnyRequest, 'authorization') ?? '';
    const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(value);
    if (match) {
      // Hashes of equal length compared in constant time, against every user: no early exit that times the name.
      const given = digest(Buffer.from(match[1], 'base64').toString('utf8'));
      let found: (typeof known)[number] | undefined;
      for (const user of known) if (timingSafeEqual(given, user.hash)) found = user;
      if (found) return { access: found.access, user: found.name };
    }
    return { access: 'denied', challenge };
  };
}
