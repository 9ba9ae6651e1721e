import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { cookie, field, header, isHttps, type AnyRequest } from './dashboard-http.js';

export const CSRF_COOKIE = 'pgq_dashboard_csrf';

/**
 * Signed double-submit CSRF tokens: a random nonce lives in an HttpOnly, SameSite=Strict cookie scoped to the
 * dashboard's path; each form carries HMAC(secret, nonce). A cross-site page can neither read the cookie nor
 * compute the HMAC, and SameSite keeps the browser from sending the cookie with its POST at all. No state on
 * the server, so it works across instances that share `csrfSecret`.
 */
export class DashboardCsrf {
  constructor(private readonly secret: Buffer) {}

  /** The nonce of this browser, a new one (with the Set-Cookie value to send) when it has none. */
  nonceFor(req: AnyRequest, base: string): { nonce: string; setCookie: string | null } {
    const existing = cookie(req, CSRF_COOKIE);
    if (existing && /^[A-Za-z0-9_-]{22,64}$/.test(existing)) return { nonce: existing, setCookie: null };
    const nonce = randomBytes(24).toString('base64url');
    const attributes = [`${CSRF_COOKIE}=${nonce}`, `Path=${base || '/'}`, 'HttpOnly', 'SameSite=Strict', ...(isHttps(req) ? ['Secure'] : [])];
    return { nonce, setCookie: attributes.join('; ') };
  }

  token(nonce: string): string {
    return createHmac('sha256', this.secret).update(nonce).digest('base64url');
  }

  /** True when the POST carries the token of its cookie's nonce (form field `_csrf` or header x-csrf-token), and no browser says it comes from another site. */
  verify(req: AnyRequest): boolean {
    const site = header(req, 'sec-fetch-site');
    if (site === 'cross-site' || site === 'same-site') return false;
    const nonce = cookie(req, CSRF_COOKIE);
    const sent = field(req, '_csrf') ?? header(req, 'x-csrf-token');
    if (!nonce || !sent) return false;
    const expected = Buffer.from(this.token(nonce));
    const given = Buffer.from(sent);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}
