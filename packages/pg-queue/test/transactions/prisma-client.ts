import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const REPO_DIR = fileURLToPath(new URL('../../../../', import.meta.url));
/** Generated clients live under the test folder (git-ignored), where '@prisma/client' resolves to the workspace's. */
const GENERATED_DIR = fileURLToPath(new URL('../.prisma/', import.meta.url));

/** The app table the tests write beside their jobs, as Prisma models it. */
const SCHEMA = `
generator client {
  provider            = "prisma-client"
  output              = "./client"
  moduleFormat        = "esm"
  importFileExtension = "js"
}

datasource db {
  provider = "postgresql"
}

model Order {
  id    Int    @id @default(autoincrement())
  email String
  @@map("orders")
}
`;

/**
 * Generates a Prisma 7 client (the `prisma-client` generator: TypeScript, no query engine) into its own folder
 * and returns the path of its entry, client.ts. `prisma generate` needs no engine, but the CLI checks for the
 * schema engine first and would download it; PRISMA_SCHEMA_ENGINE_BINARY names one so that it does not (this
 * machine reaches the npm registry only).
 */
export async function generatePrismaClient(name: string): Promise<string> {
  const dir = join(GENERATED_DIR, name);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'schema.prisma'), SCHEMA);
  await promisify(execFile)(process.execPath, [join(REPO_DIR, 'node_modules', 'prisma', 'build', 'index.js'), 'generate', '--schema', join(dir, 'schema.prisma')], {
    cwd: REPO_DIR,
    env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: '/bin/true', PRISMA_HIDE_UPDATE_MESSAGE: '1', CHECKPOINT_DISABLE: '1' },
  });
  return join(dir, 'client', 'client.ts');
}

/** The app table, made with SQL: migrating with Prisma would need its schema engine. */
export const ORDERS_TABLE = `CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, email text NOT NULL)`;
