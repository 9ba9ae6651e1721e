export interface BannerInfo {
  url: string;
  database: string;
  shutdownGraceMs: number;
  dashboardPassword: string;
}

/** The start-up banner: where the app is and what to try. */
export function printBanner({ url, database, shutdownGraceMs, dashboardPassword }: BannerInfo): void {
  const json = `-H 'content-type: application/json'`;
  const lines = [
    `nestjs-pg-queue demo listening on ${url}`,
    `PostgreSQL: ${database}`,
    '',
    'Place an order (the row and its email job commit together):',
    `  curl -s -X POST ${url}/orders ${json} -d '{"email":"ada@example.com","item":"keyboard","amount":49.9}'`,
    'A refused order (400): neither the row nor the job is left behind:',
    `  curl -s -X POST ${url}/orders ${json} -d '{"email":"ada@example.com","item":"keyboard","amount":0}'`,
    'Enqueue 50 jobs across emails, sync (flaky: retries, dead letters) and thumbnails (timeouts):',
    `  curl -s -X POST '${url}/demo/burst?n=50'`,
    'Counts per queue and status, one job, retry a dead letter, cancel a queued job:',
    `  curl -s ${url}/stats`,
    `  curl -s ${url}/jobs/1`,
    `  curl -s -X POST ${url}/jobs/1/retry`,
    `  curl -s -X POST ${url}/jobs/1/cancel`,
    'A recurring job (orders per minute, once across instances): its next and last fire:',
    `  curl -s ${url}/schedules`,
    'Prometheus metrics, and health (all checks, liveness, readiness):',
    `  curl -s ${url}/metrics`,
    `  curl -s ${url}/health   (also /health/live, /health/ready)`,
    '',
    `Dashboard: ${url}/dashboard  (user admin or viewer (read-only), password ${dashboardPassword})`,
    '',
    `Ctrl-C stops: running jobs get ${shutdownGraceMs / 1000} s to finish, then PostgreSQL stops.`,
  ];
  const rule = '-'.repeat(78);
  console.log(['', rule, ...lines.map((l) => `  ${l}`), rule, ''].join('\n'));
}
