import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The compiled code every child process loads: the library's build and the benchmark's own. */
const BUILDS = [fileURLToPath(new URL('../../../../packages/pg-queue/dist/', import.meta.url)), fileURLToPath(new URL('../', import.meta.url))];

/**
 * A hash of every compiled file the worker processes import. Children load the build afresh when they
 * start, so a rebuild in the middle of a run (someone else's `tsc -b` in the same working tree) would mix
 * two versions of the library in one table; comparing the hash at the start and at the end catches it.
 */
export function buildFingerprint(): string {
  const hash = createHash('sha1');
  for (const root of BUILDS) {
    for (const file of listJs(root)) hash.update(file).update(readFileSync(join(root, file)));
  }
  return hash.digest('hex').slice(0, 12);
}

function listJs(root: string, dir = ''): string[] {
  let entries;
  try {
    entries = readdirSync(join(root, dir), { withFileTypes: true });
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    const rel = join(dir, e.name);
    if (e.isDirectory()) out.push(...listJs(root, rel));
    else if (e.name.endsWith('.js')) out.push(rel);
  }
  return out;
}
