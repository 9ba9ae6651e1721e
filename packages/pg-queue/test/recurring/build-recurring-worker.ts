import { transformFile } from '@swc/core';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE_DIR = fileURLToPath(new URL('../../', import.meta.url));
const REPO_DIR = join(PACKAGE_DIR, '..', '..');

/** Jest's swc settings (jest.config.ts): legacy decorators with metadata, as Nest needs. */
const SWC_OPTIONS = {
  swcrc: false,
  configFile: false,
  jsc: { parser: { syntax: 'typescript' as const, decorators: true }, transform: { legacyDecorator: true, decoratorMetadata: true }, target: 'es2022' as const },
  module: { type: 'es6' as const },
  sourceMaps: 'inline' as const,
};

/**
 * Compiles the library's source and recurring-worker.ts with swc under the repository's node_modules/.cache
 * (so bare imports resolve to the workspace's packages), as the fault suite's build-worker.ts does for its worker.
 */
export async function buildRecurringWorker(): Promise<{ script: string; remove(): Promise<void> }> {
  const outDir = join(REPO_DIR, 'node_modules', '.cache', 'pg-queue-recurring', `${process.pid}-${Date.now().toString(36)}`);
  const entries = await readdir(join(PACKAGE_DIR, 'src'), { withFileTypes: true, recursive: true });
  const sources = entries.filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')).map((e) => join(e.parentPath, e.name));
  sources.push(join(PACKAGE_DIR, 'test', 'recurring', 'recurring-worker.ts'));
  await Promise.all(
    sources.map(async (source) => {
      const target = join(outDir, relative(PACKAGE_DIR, source)).replace(/\.ts$/, '.js');
      const { code } = await transformFile(source, { ...SWC_OPTIONS, filename: source });
      await mkdir(dirname(target), { recursive: true });
      await writeFile(target, code);
    }),
  );
  await writeFile(join(outDir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
  return { script: join(outDir, 'test', 'recurring', 'recurring-worker.js'), remove: () => rm(outDir, { recursive: true, force: true }) };
}
