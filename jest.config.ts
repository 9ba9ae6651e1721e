import type { Config } from 'jest';

// Nest 12 ships ESM only, so Jest runs in ESM mode (NODE_OPTIONS=--experimental-vm-modules, see package.json)
// and swc compiles TypeScript with the legacy decorators and metadata Nest needs.
const swc = [
  '@swc/jest',
  {
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
    },
    module: { type: 'es6' },
  },
];

// PG_QUEUE_TEST_PG_DRIVER=lowest: the library and the tests on the lowest pg of the peer range (devDependency
// "pg-8.11", an npm alias), as an app pinned to it has; CI runs the enqueue and worker specs so (.ci/run).
const driver = process.env.PG_QUEUE_TEST_PG_DRIVER;
if (driver !== undefined && driver !== '' && driver !== 'lowest') throw new Error(`PG_QUEUE_TEST_PG_DRIVER must be "lowest" or unset; got "${driver}"`);
const lowestPg: Record<string, string> = driver === 'lowest' ? { '^pg$': '<rootDir>/node_modules/pg-8.11/lib/index.js' } : {};

// What `npm run test:quick` leaves out, so that the part of the suite a developer runs while working (86 of the 141
// spec files) takes under 4 minutes on a 2-core machine, against 11 or more for `npm test`, which CI runs whole: specs that
// start OS processes (worker processes, the built CLI, the demo), the fault suite, the dashboard's browser specs, the
// plan specs (tables of up to a million rows), PgBouncer, the mutation catchers, the type-level tests (they run tsc),
// and the specs that stall, starve or wait out timeouts on purpose (10-22 s each).
const SLOW_SPECS = [
  '-processes\\.spec\\.ts$',
  '<rootDir>/packages/pg-queue/test/faults/',
  '<rootDir>/packages/pg-queue/test/dashboard/',
  '/cli(-flows)?\\.spec\\.ts$',
  '/read-ahead-promises\\.spec\\.ts$',
  '/demo-process\\.spec\\.ts$',
  '-plans?\\.spec\\.ts$',
  '/large-table\\.spec\\.ts$',
  'pgbouncer\\.spec\\.ts$',
  '/migration-locks\\.spec\\.ts$',
  '/adopt-seed-traffic\\.spec\\.ts$',
  '/harness-servers\\.spec\\.ts$',
  '/jest-exits\\.spec\\.ts$',
  '/listener-liveness\\.spec\\.ts$',
  '<rootDir>/packages/pg-queue/test/mutations/',
  '\\.types\\.spec\\.ts$',
  '/demo-metrics\\.spec\\.ts$',
  '/partitioned-history\\.spec\\.ts$',
  '/request-scoped-handlers\\.spec\\.ts$',
  '/read-ahead-settling\\.spec\\.ts$',
  '/unwritable-outcomes\\.spec\\.ts$',
  '/connection-budget\\.spec\\.ts$',
  '/prefetch-auto\\.spec\\.ts$',
  '/terminal-text\\.spec\\.ts$',
  '/start-marks\\.spec\\.ts$',
  '/job-logs-views\\.spec\\.ts$',
];

const config: Config = {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: { '^.+\\.ts$': swc as never },
  moduleNameMapper: {
    ...lowestPg,
    '^nestjs-pg-queue$': '<rootDir>/packages/pg-queue/src/index.ts',
    '^nestjs-pg-queue/testing$': '<rootDir>/packages/pg-queue/src/testing/index.ts',
    '^nestjs-pg-queue/dashboard$': '<rootDir>/packages/pg-queue/src/dashboard/index.ts',
    '^nestjs-pg-queue/metrics$': '<rootDir>/packages/pg-queue/src/metrics/index.ts',
    '^nestjs-pg-queue/health$': '<rootDir>/packages/pg-queue/src/health/index.ts',
    '^@internal/pg-harness$': '<rootDir>/libs/pg-harness/src/index.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  testMatch: ['<rootDir>/packages/*/test/**/*.spec.ts', '<rootDir>/apps/*/test/**/*.spec.ts'],
  // The simulation (test/sim, issue 40) runs for minutes: only through `npm run test:sim`, which sets PG_QUEUE_SIM.
  // `npm run test:quick` (PG_QUEUE_QUICK) also leaves out the slow specs below.
  testPathIgnorePatterns: process.env.PG_QUEUE_SIM
    ? ['/node_modules/']
    : ['/node_modules/', '<rootDir>/packages/pg-queue/test/sim/', ...(process.env.PG_QUEUE_QUICK ? SLOW_SPECS : [])],
  globalSetup: '<rootDir>/libs/pg-harness/jest/global-setup.ts',
  globalTeardown: '<rootDir>/libs/pg-harness/jest/global-teardown.ts',
  testTimeout: 60_000,
  maxWorkers: 2,
};

export default config;
