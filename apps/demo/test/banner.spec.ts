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
    expect(lines).toContain('  npx pg-queue stats --url postgres://postgres:postgres@127.0.0.1:54329/postgres');
    expect(lines).toContain('  PORT=3001 npm start');
    expect(lines.at(-1)).toBe('Ctrl-C stops: running jobs get 5 s to finish, then PostgreSQL stops (stop other instances sharing it first).');
  });

  it('masks the password of a DATABASE_URL, and has the CLI read it from the environment', () => {
    const lines = bannerLines({ ...info, databaseKind: 'url', databaseUrl: 'postgres://app:s3cret@db.internal:5432/shop' });
    expect(lines.join('\n')).not.toContain('s3cret');
    expect(lines).toContain('Database URL: postgres://app:***@db.internal:5432/shop');
    expect(lines).toContain('  npx pg-queue stats --url "$DATABASE_URL"');
    expect(lines).toContain('  PORT=3001 npm start   (with the same DATABASE_URL)');
    expect(lines.at(-1)).toBe('Ctrl-C stops: running jobs get 5 s to finish.');
  });
});
