import { expect, it } from '@jest/globals';
import { createDatabase, createTestDatabase, startPostgres } from '@internal/pg-harness';
import { replayCommand, runSim } from './run-sim.js';

// The generated feature-by-fault simulation (issue 40, docs/reliability.md "The simulation"). Not part of `npm
// test` (jest.config.ts ignores test/sim unless PG_QUEUE_SIM is set): `npm run test:sim -- --seed N --minutes M`
// runs it, and .ci/run runs it for a fixed budget with a fresh seed. The seed is printed first, whatever happens.
const seed = process.env.PG_QUEUE_SIM_SEED ? Number(process.env.PG_QUEUE_SIM_SEED) : Math.floor(Math.random() * 2 ** 31);
const minutes = Number(process.env.PG_QUEUE_SIM_MINUTES ?? 3);
if (!Number.isInteger(seed) || seed < 0 || !(minutes > 0)) throw new Error(`PG_QUEUE_SIM_SEED must be a non-negative integer and PG_QUEUE_SIM_MINUTES a positive number`);
process.stdout.write(`sim: seed ${seed} (replay: ${replayCommand(seed, minutes)})\n`);

// The budget is the plan's minutes plus booting, the drain (90 s at most) and the exits; a timeout is a failure
// like any other, never raised to hide one.
// The run has a server of its own, so that restarting PostgreSQL is one of its faults; given a server by URL
// (DATABASE_URL), it runs there and skips the restarts.
it(`seed ${seed}: every invariant holds for ${minutes} minute(s) of generated workload, operator actions and faults`, async () => {
  const server = process.env.DATABASE_URL ? undefined : await startPostgres({ url: null, containers: false });
  try {
    const url = server ? await createDatabase(server.url, `sim_${seed}`) : await createTestDatabase(`sim_${seed}`);
    const result = await runSim(url, seed, minutes, server);
    expect(result.violations.map((v) => `${v.invariant}: jobs ${v.jobIds.join(', ')}: ${v.detail}`)).toEqual([]);
  } finally {
    await server?.stop();
  }
}, minutes * 60_000 + 360_000);
