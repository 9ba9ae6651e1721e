// Follows a documentation page literally, as a reader would (.ci/check-quick-start.sh, .ci/check-testing-guide.sh):
// its fenced blocks, in the page's order, are the steps.
// - A block whose first line is a comment naming a file (`// src/app.module.ts`, `// tsconfig.json`, in any
//   language but bash) is that file, in full: written, with that first line, relative to the current folder.
// - A ```bash block is commands, run with bash -e in the current folder; a `cd` in it carries over to the next
//   steps. ```bash ignore: not run (an alternative, a command for another kind of project). ```bash background: a
//   long-running command (a server, the app): the check decides how to start and stop it.
// - Every other block (output, fragments, ```ts blocks without a file name) is prose to CI.
// `npm install` lines get the packed library in place of the registry's nestjs-pg-queue (a path, such as the quick
// start's own tarball, stays as it is), and every other package
// at the version this repository tests with (the root package.json), or the check's own pin, so that a new major
// on npm breaks nothing here before the library supports it (PG_QUEUE_DOCS_LATEST=1: the versions npm picks
// today, as a reader gets them). A package with no pin is an error: add it to the root package.json or a pin.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The steps of a page: { kind: 'file' | 'command' | 'background', section, line, path?, text }. */
export function readSteps(page, { skipSections = [] } = {}) {
  const lines = readFileSync(page, 'utf8').split('\n');
  const rel = relative(root, page);
  const steps = [];
  let section = '';
  for (let i = 0; i < lines.length; i++) {
    const heading = /^##\s+(.*?)\s*$/.exec(lines[i]);
    if (heading) section = heading[1];
    const open = /^(\s*)(`{3,})(.*)$/.exec(lines[i]);
    if (!open) continue;
    const [, indent, ticks, info] = open;
    const body = [];
    let j = i + 1;
    for (; j < lines.length && !new RegExp(`^\\s*${ticks}\\s*$`).test(lines[j]); j++) body.push(lines[j].startsWith(indent) ? lines[j].slice(indent.length) : lines[j]);
    const [lang = '', ...flags] = info.trim().split(/\s+/);
    const at = { section, line: i + 1, where: `${rel}:${i + 1}` };
    i = j;
    if (skipSections.includes(section)) continue;
    const text = body.join('\n') + '\n';
    if (lang === 'bash' || lang === 'sh') {
      if (flags.includes('ignore')) continue;
      steps.push({ ...at, kind: flags.includes('background') ? 'background' : 'command', text });
      continue;
    }
    const file = /^(?:\/\/|#)\s*([\w.-]+(?:\/[\w.-]+)*\.\w+)\s*$/.exec(body[0] ?? '');
    if (file) steps.push({ ...at, kind: 'file', path: file[1], text });
  }
  return steps;
}

/** The version of each package this repository tests with: the root package.json's dependencies and devDependencies. */
function repoPins() {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  return { ...pkg.devDependencies, ...pkg.dependencies };
}

/** An `npm install` line with the packed library and the pinned versions; other lines unchanged. */
export function pinInstall(line, { tarball, pins = {}, where = '' }) {
  const m = /^(\s*npm (?:install|i|add)\s+)(.*)$/.exec(line);
  if (!m) return line;
  const known = { ...repoPins(), ...pins };
  const latest = process.env.PG_QUEUE_DOCS_LATEST === '1';
  const args = m[2]
    .trim()
    .split(/\s+/)
    .map((arg) => {
      if (arg.startsWith('-')) return arg;
      // A path (the quick start's tarball, packed by the page's own command): the page's, as it is.
      if (/^(\.{0,2}\/|~)/.test(arg)) return arg;
      const [, name, version] = /^(@?[^@]+)(?:@(.+))?$/.exec(arg);
      if (name === 'nestjs-pg-queue') return tarball;
      if (latest) return arg;
      if (known[name]) return `${name}@${known[name]}`;
      if (version) return arg;
      throw new Error(`${where}: npm install ${name}: no version to pin it to (add it to the root package.json or to the check's pins)`);
    });
  return `npm install --prefer-offline --no-audit --no-fund --loglevel=error ${args.join(' ')}`;
}

/** Runs a command with bash in `cwd`; resolves with the folder it ended in (a `cd` carries over). */
export async function runCommand(text, { cwd, env, where, timeoutMs = 300_000 }) {
  const scratch = mkdtempSync(join(tmpdir(), 'doc-step-'));
  const pwdFile = join(scratch, 'pwd');
  try {
    const code = await new Promise((resolvePromise, reject) => {
      const child = spawn('bash', ['-e', '-o', 'pipefail', '-c', `${text}\npwd >'${pwdFile}'`], { cwd, env, stdio: ['ignore', 'inherit', 'inherit'] });
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`${where}: still running after ${timeoutMs / 1000} s:\n${text}`));
      }, timeoutMs);
      child.on('exit', (c, signal) => {
        clearTimeout(timer);
        resolvePromise(c ?? signal);
      });
    });
    if (code !== 0) throw new Error(`${where}: exited with ${code}:\n${text}`);
    return readFileSync(pwdFile, 'utf8').trim();
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/**
 * Follows the steps from `cwd`: writes the files, runs the commands (their `npm install` lines pinned, then
 * `rewrite` applied to every command and file), hands each background command to `background(text, cwd)`.
 * Resolves with the folder the steps ended in.
 */
export async function followSteps(steps, { cwd, tarball, pins, rewrite = (t) => t, background, env = {} }) {
  // npx must not download what the page forgot to install (a bare `npx tsc` fetches an unrelated package).
  const childEnv = { ...process.env, npm_config_yes: 'false', NO_COLOR: '1', FORCE_COLOR: '0', ...env };
  for (const step of steps) {
    if (step.kind === 'file') {
      const path = join(cwd, step.path);
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, rewrite(step.text));
      console.log(`-- ${step.where}: wrote ${step.path}`);
      continue;
    }
    const text = rewrite(
      step.text
        .split('\n')
        .map((l) => pinInstall(l, { tarball, pins, where: step.where }))
        .join('\n'),
    );
    if (step.kind === 'background') {
      if (!background) throw new Error(`${step.where}: a background command, and this check runs none:\n${text}`);
      console.log(`-- ${step.where}: (background) ${text.trim()}`);
      await background(text, cwd, step);
      continue;
    }
    console.log(`-- ${step.where}: ${text.trim().replace(/\n/g, '\n   ')}`);
    cwd = await runCommand(text, { cwd, env: childEnv, where: step.where });
  }
  return cwd;
}

/** Starts a background command (its own process group); resolves once its output matches `ready`. */
export function startBackground(text, { cwd, env, ready, where, timeoutMs = 90_000 }) {
  // bash runs a single command by exec: the child is the command itself, and a signal reaches it.
  const child = spawn('bash', ['-c', text.trim()], {
    cwd,
    env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  const exited = new Promise((r) => child.on('exit', (code, signal) => r({ code, signal })));
  const started = new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`${where}: no ${ready} within ${timeoutMs / 1000} s; output:\n${output}`)), timeoutMs);
    const onData = (d) => {
      output += d;
      if (ready.test(output)) {
        clearTimeout(timer);
        resolvePromise();
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`${where}: exited (${code ?? signal}) before ${ready}; output:\n${output}`));
    });
  });
  return {
    child,
    started,
    exited,
    output: () => output,
    /** SIGTERM, then SIGKILL to the whole group after `graceMs`; resolves with how it ended. */
    async stop(graceMs = 30_000) {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      child.kill('SIGTERM');
      const ended = await Promise.race([exited, new Promise((r) => setTimeout(() => r(null), graceMs))]);
      if (ended) return ended;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* gone already */
      }
      await exited;
      return { code: 'killed after the grace period' };
    },
  };
}
