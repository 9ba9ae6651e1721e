import type { Command } from 'commander';
import type { MigrateOptions } from '../migrations.js';
import type { Run } from '../run.js';

// TypeORM and Nest load only when a migrate command runs: the other commands start faster without them.
const load = () => import('../migrations.js');

export function registerMigrate(program: Command, run: Run): void {
  const migrate = program
    .command('migrate')
    .description("the queue's schema: apply pending migrations (up, the default), undo the last one (down), or list them (status)")
    .option('--migrations-table <name>', "TypeORM's migrations table, if your DataSource names it (default: migrations)");
  migrate
    .command('up', { isDefault: true })
    .description('apply every pending queue migration (under the same advisory lock as the module, so safe beside booting apps)')
    .action(run(async (c, _args, o: MigrateOptions) => (await load()).up(c, o)));
  migrate
    .command('down')
    .description('undo the last applied queue migration (one step); says what it drops and asks first')
    .option('-y, --yes', 'do not ask for confirmation (needed when stdin is not a terminal)')
    .action(run(async (c, _args, o: MigrateOptions & { yes?: boolean }) => (await load()).down(c, o)));
  migrate
    .command('status')
    .description('list the queue migrations, applied or pending')
    .option('--json', 'as JSON')
    .action(run(async (c, _args, o: MigrateOptions) => (await load()).status(c, o)));
}
