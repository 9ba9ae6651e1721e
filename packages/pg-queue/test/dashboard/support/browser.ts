import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Browser } from 'playwright-core';

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
