import { transformFile } from '@swc/core';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE_DIR = fileURLToPath(new URL('../../../', import.meta.url));
const REPO_DIR = join(PACKAGE_DIR, '..', '..');
const SUPPORT_DIR = join(PACKAGE_DIR, 'test', 'faults', 'support');
/** The worker script and the one module of the suite it imports. */
const WORKER_SOURCES = ['worker-process.ts', 'fault-kinds.ts'].map((file) => join(SUPPORT_DIR, file));
/** The start protocol every worker script speaks; compiled with each of them. */
const SERVE_START = join(PACKAGE_DIR, 'test', 'support', 'serve-start.ts');

/** The same swc settings Jest uses (jest.config.ts): legacy decorators with metadata, as Nest needs. */
const SWC_OPTIONS = {
  swcrc: false,
  configFile: false,
  jsc: {
    parser: { syntax: 'typescript' as const, decorators: true },
    transform: { legacyDecorator: true, decoratorMetadata: true },
    target: 'es2022' as const,
  },
  module: { type: 'es6' as const },
  sourceMaps: 'inline' as const,
};

export interface WorkerBuild {
  /** The compiled worker-process script, to fork. */
  script: string;
  remove(): Promise<void>;
}

/**
 * Compiles the library's source and the worker script with swc into a fresh folder under the repository's
 * node_modules/.cache (so that bare imports such as '@nestjs/core' resolve to the workspace's packages),
 * keeping the package layout so the worker's relative import of src/index.js holds. Needs no prior
 * `npm run build` and takes well under a second: a clean clone runs the suite as it is.
 */
/** `workerSources`: the script to fork first, then the test modules it imports (default: the fault suite's worker). */
export async function buildWorker(workerSources = WORKER_SOURCES): Promise<WorkerBuild> {
  const outDir = join(REPO_DIR, 'node_modules', '.cache', 'pg-queue-faults', `${process.pid}-${Date.now().toString(36)}`);
  const sources = [...(await listTs(join(PACKAGE_DIR, 'src'))), ...workerSources, SERVE_START];
  await Promise.all(
    sources.map(async (source) => {
      const target = join(outDir, relative(PACKAGE_DIR, source)).replace(/\.ts$/, '.js');
      const { code } = await transformFile(source, { ...SWC_OPTIONS, filename: source });
      await mkdir(dirname(target), { recursive: true });
      await writeFile(target, code);
    }),
  );
  // The package scope stops at node_modules, so the folder declares ESM itself.
  await writeFile(join(outDir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
  return {
    script: join(outDir, relative(PACKAGE_DIR, workerSources[0])).replace(/\.ts$/, '.js'),
    remove: () => rm(outDir, { recursive: true, force: true }),
  };
}

async function listTs(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
    .map((e) => join(e.parentPath, e.name));
}
