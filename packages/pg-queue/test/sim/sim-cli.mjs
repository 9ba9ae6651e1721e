#!/usr/bin/env node
// `npm run test:sim -- --seed N --minutes M`: runs the simulation (sim.spec.ts -> run-sim.ts) in Jest, whose global
// setup provides the PostgreSQL (DATABASE_URL, a container, or embedded PostgreSQL) and whose swc transform compiles
// the TypeScript. Without --seed a fresh one is drawn and printed; --minutes defaults to 3.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const value = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
for (const [i, arg] of args.entries()) {
  if (arg.startsWith('--') && !['--seed', '--minutes'].includes(arg)) {
    process.stderr.write(`test:sim: unknown option ${arg} (options: --seed N, --minutes M)\n`);
    process.exit(2);
  }
  if (!arg.startsWith('--') && !['--seed', '--minutes'].includes(args[i - 1])) {
    process.stderr.write(`test:sim: unexpected argument ${arg}\n`);
    process.exit(2);
  }
}
const seed = value('--seed') ?? String(Math.floor(Math.random() * 2 ** 31));
const minutes = value('--minutes') ?? '3';
if (!/^\d+$/.test(seed) || !(Number(minutes) > 0)) {
  process.stderr.write(`test:sim: --seed must be a non-negative integer and --minutes a positive number\n`);
  process.exit(2);
}
process.stdout.write(`test:sim: seed ${seed}, ${minutes} minute(s)\n`);
const spec = fileURLToPath(new URL('./sim.spec.ts', import.meta.url));
const result = spawnSync('npx', ['jest', '--runTestsByPath', spec, '--forceExit'], {
  stdio: 'inherit',
  env: { ...process.env, NODE_OPTIONS: '--experimental-vm-modules', PG_QUEUE_SIM: '1', PG_QUEUE_SIM_SEED: seed, PG_QUEUE_SIM_MINUTES: minutes },
});
process.exit(result.status ?? 1);
