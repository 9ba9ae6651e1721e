import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';

/**
 * The embedded PostgreSQL's port on the first start, when it is free: the database URL (and the CLI line the banner
 * prints) then stays the same from one start to the next. Kept beside the data folder once a server has used it.
 */
export const DEFAULT_DATABASE_PORT = 54_329;

/** The port a kept data folder's server used last, or undefined when none is recorded (or the file is unreadable). */
export function rememberedPort(file: string): number | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  const port = Number(text.trim());
  return Number.isInteger(port) && port > 0 && port < 65_536 ? port : undefined;
}

export async function rememberPort(file: string, port: number): Promise<void> {
  await writeFile(file, `${port}\n`);
}
