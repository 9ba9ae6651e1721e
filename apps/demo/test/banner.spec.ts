import { describe, expect, it } from '@jest/globals';
import { bannerLines, type BannerInfo } from '../src/banner.js';

// The banner is pure text: what it prints for each kind of database (the process spec checks it on a real start).
describe('the start-up banner', () => {
  const info: BannerInfo = {
    url: 'http://localhost:3000',
    database: 'embedded, data in apps/demo/.data/pg',
    databaseUrl: 'postgres://postgres:postgres@127.0.0.1:54329/postgres',
    databaseKind: 'embedded',
    shutdownGraceMs: 5_000,
    dashboardPassword: 'pw',
  };

  it('prints the embedded server’s URL whole (local only), a ready-to-paste CLI line, and how to start a second instance', () => {
    const lines = bannerLines(info);
    expect(lines).toContain("Database URL: postgres://postgres:postgres@127.0.0.1:54329/postgres  (local only; the embedded server's demo password)");
    // The CLI reads the URL from DATABASE_URL: a password in --url shows in ps, and the CLI warns about it.
    expect(lines).toContain('  export DATABASE_URL=postgres://postgres:postgres@127.0.0.1:54329/postgres');
    expect(lines).toContain('  npx pg-queue stats');
    expect(lines.filter((l) => l.includes('npx pg-queue') && l.includes('--url'))).toEqual([]);
    expect(lines).toContain('  PORT=3001 npm start');
    expect(lines.at(-1)).toBe('Ctrl-C stops: running jobs get 5 s to finish, then PostgreSQL stops (stop other instances sharing it first).');
  });

  it('masks the password of a DATABASE_URL, and has the CLI read it from the environment', () => {
    const lines = bannerLines({ ...info, databaseKind: 'url', databaseUrl: 'postgres://app:s3cret@db.internal:5432/shop' });
    expect(lines.join('\n')).not.toContain('s3cret');
    expect(lines).toContain('Database URL: postgres://app:***@db.internal:5432/shop');
    expect(lines).toContain('  npx pg-queue stats');
    expect(lines.join('\n')).not.toContain('--url');
    expect(lines.join('\n')).not.toContain('export DATABASE_URL');
    expect(lines).toContain('  PORT=3001 npm start   (with the same DATABASE_URL)');
    expect(lines.at(-1)).toBe('Ctrl-C stops: running jobs get 5 s to finish.');
  });

  it('retries a dead letter by its id when there is one, and otherwise says how to find one (never job 1, which may have completed)', () => {
    expect(bannerLines({ ...info, deadLetterId: '42' })).toContain('  curl -s -X POST http://localhost:3000/jobs/42/retry   (job 42 is a dead letter now)');
    const none = bannerLines(info);
    expect(none).toContain('  npx pg-queue jobs list --status failed   (none yet: a burst makes some in the sync queue within a minute)');
    expect(none.join('\n')).not.toContain('/jobs/1/retry');
  });
});
