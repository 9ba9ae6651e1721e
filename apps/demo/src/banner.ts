import { maskedUrl } from './database-url.js';

export interface BannerInfo {
  url: string;
  database: string;
  databaseUrl: string;
  /**
   * embedded: this process started the server; shared: another demo's embedded server (that demo stops it); url:
   * the user's own server (DATABASE_URL), whose URL may carry a real password.
   */
  databaseKind: 'embedded' | 'shared' | 'url';
  shutdownGraceMs: number;
  dashboardPassword: string;
  /** A dead letter (a job failed for good) found as the banner is printed, if there is one. */
  deadLetterId?: string;
}

/** The start-up banner: where the app is and what to try. */
export function bannerLines({ url, database, databaseUrl, databaseKind, shutdownGraceMs, dashboardPassword, deadLetterId }: BannerInfo): string[] {
  const local = databaseKind !== 'url';
  const json = `-H 'content-type: application/json'`;
  // The embedded server listens on 127.0.0.1 only, with the demo's fixed password: its URL is printed whole, ready
  // to paste. A URL the user gave may carry a real password: it is masked. Either way the CLI reads the URL from
  // DATABASE_URL, not --url: a password on a command line is readable by every user of the machine (ps), and the
  // CLI warns about it.
  const cliSetup = local ? [`  export DATABASE_URL=${databaseUrl}`] : [];
  // At start-up there is rarely a dead letter yet: then the banner says how to find one.
  const retry = deadLetterId
    ? [`  curl -s -X POST ${url}/jobs/${deadLetterId}/retry   (job ${deadLetterId} is a dead letter now)`]
    : [
        '  npx pg-queue jobs list --status failed   (none yet: a burst makes some in the sync queue within a minute)',
        `  curl -s -X POST ${url}/jobs/<id of a failed job>/retry`,
      ];
  return [
    `nestjs-pg-queue demo listening on ${url}`,
    `PostgreSQL: ${database}`,
    `Database URL: ${local ? `${databaseUrl}  (local only; the embedded server's demo password)` : maskedUrl(databaseUrl)}`,
    '',
    'Place an order (the row and its email job commit together):',
    `  curl -s -X POST ${url}/orders ${json} -d '{"email":"ada@example.com","item":"keyboard","amount":49.9}'`,
    'A refused order (400): neither the row nor the job is left behind:',
    `  curl -s -X POST ${url}/orders ${json} -d '{"email":"ada@example.com","item":"keyboard","amount":0}'`,
    'Enqueue 50 jobs across emails, sync (flaky: retries, dead letters) and thumbnails (timeouts):',
    `  curl -s -X POST '${url}/demo/burst?n=50'`,
    'Counts per queue and status, one job, cancel a queued job:',
    `  curl -s ${url}/stats`,
    `  curl -s ${url}/jobs/1`,
    `  curl -s -X POST ${url}/jobs/1/cancel`,
    'A recurring job (orders per minute, once across instances): its next and last fire:',
    `  curl -s ${url}/schedules`,
    'Prometheus metrics, and health (all checks, liveness, readiness):',
    `  curl -s ${url}/metrics`,
    `  curl -s ${url}/health   (also /health/live, /health/ready)`,
    `The command line on this database (from the repo root; it reads DATABASE_URL${local ? '' : ', as the demo did'}; \`npx pg-queue --help\` lists the commands):`,
    ...cliSetup,
    '  npx pg-queue stats',
    `  npx pg-queue enqueue emails '{"to":"ada@example.com","subject":"Hi","body":"Hello"}'`,
    'Retry a dead letter (a job that used up its attempts):',
    ...retry,
    'A second instance on the same database (it needs only another port):',
    `  PORT=${Number(new URL(url).port) + 1} npm start${databaseKind === 'url' ? '   (with the same DATABASE_URL)' : ''}`,
    '',
    `Dashboard: ${url}/dashboard  (user admin or viewer (read-only), password ${dashboardPassword})`,
    '',
    `Ctrl-C stops: running jobs get ${shutdownGraceMs / 1000} s to finish${databaseKind === 'embedded' ? ', then PostgreSQL stops (stop other instances sharing it first)' : ''}.`,
  ];
}

export function printBanner(info: BannerInfo): void {
  const rule = '-'.repeat(78);
  console.log(['', rule, ...bannerLines(info).map((l) => `  ${l}`), rule, ''].join('\n'));
}
