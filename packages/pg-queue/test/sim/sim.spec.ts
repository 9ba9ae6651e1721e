import { expect, it } from '@jest/globals';
import { createTestDatabase } from '@internal/pg-harness';
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
it(`seed ${seed}: every invariant holds for ${minutes} minute(s) of generated workload, operator actions and faults`, async () => {
  const url = await createTestDatabase(`sim_${seed}`);
  const result = await runSim(url, seed, minutes);
  expect(result.violations.map((v) => `${v.invariant}: jobs ${v.jobIds.join(', ')}: ${v.detail}`)).toEqual([]);
}, minutes * 60_000 + 360_000);
