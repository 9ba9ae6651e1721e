import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const PACKAGE_DIR = fileURLToPath(new URL('../../', import.meta.url));
const REPO_DIR = join(PACKAGE_DIR, '..', '..');
/** The package's bin, as package.json declares it. */
export const CLI = join(PACKAGE_DIR, 'dist', 'cli', 'main.js');

/** Builds the package (tsc -b: incremental, seconds when up to date) so that the tests run the real binary. */
export async function buildCli(): Promise<void> {
  await promisify(execFile)(process.execPath, [join(REPO_DIR, 'node_modules', 'typescript', 'bin', 'tsc'), '-b', PACKAGE_DIR], { cwd: REPO_DIR });
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `pg-queue <args>` in a child process (stdin not a terminal) and returns its exit code and output. `cli`:
 * another build of the binary (a worker build of buildWorker holds one, at src/cli/main.js, with no tsc step).
 */
export function runCli(args: string[], env: Record<string, string | undefined> = {}, input?: string, cli = CLI): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      [cli, ...args],
      { env: { ...process.env, NODE_OPTIONS: '', DATABASE_URL: undefined, PGPASSWORD: undefined, ...env }, timeout: 60_000, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error && typeof error.code !== 'number') return reject(error);
        resolve({ code: typeof error?.code === 'number' ? error.code : 0, stdout, stderr });
      },
    );
    child.stdin?.end(input ?? '');
  });
}

/**
 * Runs the CLI on a pseudo-terminal (util-linux `script`), answering `answer` to its first [y/N] question; resolves
 * with everything it printed.
 */
export function runCliOnTerminal(args: string, answer: string, url: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn('script', ['-qec', `${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} ${args}`, '/dev/null'], {
      env: { ...process.env, NODE_OPTIONS: '', DATABASE_URL: url },
    });
    let output = '';
    let answered = false;
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (!answered && output.includes('[y/N]')) {
        answered = true;
        child.stdin.write(`${answer}\r`);
      }
    });
    child.on('close', (code) => resolve({ code, output }));
  });
}
