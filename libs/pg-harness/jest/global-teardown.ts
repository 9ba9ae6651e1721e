import type { PostgresServer } from '../src/start-postgres.js';

export default async function globalTeardown(): Promise<void> {
  const server = (globalThis as Record<string, unknown>).__pgHarnessServer as PostgresServer | undefined;
  await server?.stop();
}
