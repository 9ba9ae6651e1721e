import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Browser, BrowserContext, Page } from 'playwright-core';

const CHROMIUM = process.env.PG_QUEUE_CHROMIUM ?? '/usr/bin/chromium';
// Without the background-networking flags Chromium floods a closed network with refused connections.
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/**
 * Debian's chromium, installed with apt where it is missing and we may (root with apt-get), as .ci/run does;
 * null when no browser can be had, after saying so loudly: the caller skips its browser cases.
 */
export function findChromium(): string | null {
  if (existsSync(CHROMIUM)) return CHROMIUM;
  if (process.getuid?.() === 0 && existsSync('/usr/bin/apt-get')) {
    try {
      execFileSync('/usr/bin/apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'chromium'], { stdio: 'ignore', timeout: 240_000, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    } catch {
      // Reported below.
    }
    if (existsSync(CHROMIUM)) return CHROMIUM;
  }
  const rule = '!'.repeat(100);
  console.warn(`\n${rule}\n!! DASHBOARD BROWSER TESTS SKIPPED: no Chromium at ${CHROMIUM} and it could not be installed (apt-get install -y chromium).\n!! Install it (or set PG_QUEUE_CHROMIUM) to run them.\n${rule}\n`);
  return null;
}

export async function launchChromium(executablePath: string): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({ executablePath, args: ARGS, headless: true });
}

/** The one dashboard user the browser specs sign in as (full access). */
export const ADMIN_USERS = [{ name: 'admin', password: 'admin-password', access: 'full' as const }];

/** A browser with two viewers signed in as ADMIN_USERS' admin: a desk at 1,400 px and a phone at 390 px. */
export interface Viewers {
  browser: Browser;
  desk: BrowserContext;
  phone: BrowserContext;
}

/** Chromium and its two viewers; `timezoneId` puts both in a zone that is not the server's. */
export async function openViewers(executablePath: string, timezoneId?: string): Promise<Viewers> {
  const browser = await launchChromium(executablePath);
  const httpCredentials = { username: ADMIN_USERS[0].name, password: ADMIN_USERS[0].password };
  const zone = timezoneId === undefined ? {} : { timezoneId };
  const desk = await browser.newContext({ httpCredentials, viewport: { width: 1400, height: 900 }, ...zone });
  const phone = await browser.newContext({ httpCredentials, viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2, ...zone });
  return { browser, desk, phone };
}

/**
 * A dashboard page at `url` in `context`, which must answer 200. The page is marked: a navigation drops the mark, so
 * `stayed(page)` proves a live update came without a reload.
 */
export async function openPage(context: BrowserContext, url: string): Promise<Page> {
  const page = await context.newPage();
  const response = await page.goto(url);
  if (response?.status() !== 200) throw new Error(`${url} answered ${response?.status() ?? 'nothing'}, not 200`);
  await page.evaluate(() => ((globalThis as unknown as { stayed: boolean }).stayed = true));
  return page;
}

/** Whether the page is still the one openPage opened (no reload or navigation since). */
export const stayed = (page: Page): Promise<boolean> => page.evaluate(() => (globalThis as unknown as { stayed?: boolean }).stayed === true);
