import type { DashboardRequest } from './dashboard-options.interface.js';

/** What the dashboard reads of a request, the same on Express and Fastify. */
export type AnyRequest = DashboardRequest & { url?: string; originalUrl?: string; body?: unknown; protocol?: string };

export function header(req: AnyRequest, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function cookie(req: AnyRequest, name: string): string | undefined {
  for (const part of (header(req, 'cookie') ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return undefined;
}

/** Path and query as the browser asked (with the app's global prefix): Express' originalUrl, Fastify's url. */
export function requestUrl(req: AnyRequest): URL {
  return new URL(req.originalUrl ?? req.url ?? '/', 'http://dashboard.invalid');
}

/**
 * The mount path as the browser sees it: the request's path minus as many segments as the route's own part
 * (`suffix`) has, so links stay right under a global prefix whatever the encoding of those segments.
 */
export function mountBase(req: AnyRequest, suffix: string): string {
  const segments = requestUrl(req).pathname.replace(/\/+$/, '').split('/');
  const own = suffix.split('/').filter(Boolean).length;
  return segments.slice(0, segments.length - own).join('/');
}

/** A form field of a urlencoded body (both adapters parse it by default), or undefined. */
export function field(req: AnyRequest, name: string): string | undefined {
  const body = req.body;
  if (body === null || typeof body !== 'object') return undefined;
  const value = (body as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : undefined;
}

/** Every value of a repeated form field (ticked checkboxes of one name): [] when there is none. */
export function fields(req: AnyRequest, name: string): string[] {
  const body = req.body;
  if (body === null || typeof body !== 'object') return [];
  const value = (body as Record<string, unknown>)[name];
  if (typeof value === 'string') return [value];
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

export function isHttps(req: AnyRequest): boolean {
  return req.protocol === 'https' || header(req, 'x-forwarded-proto') === 'https';
}

/**
 * Content-Security-Policy of every answer: only the package's own script and style sheet, no inline script,
 * forms only to this origin, never framed (clickjacking the action buttons).
 */
export const SECURITY_HEADERS: Record<string, string> = {
  'Content-Security-Policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'same-origin',
};

/** Where a POST goes back to: a path of this dashboard only (never another site). */
export function returnPath(base: string, wanted: string | undefined): string {
  if (wanted && (wanted === base || wanted.startsWith(`${base}/`) || wanted.startsWith(`${base}?`)) && !/[\\\s]|\/\//.test(wanted)) return wanted;
  return `${base}/`;
}
