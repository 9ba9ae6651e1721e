#!/usr/bin/env node
// `npm run docs:check`: the documentation stays true to the code.
// 1. Every ```ts block of README.md and docs/**/*.md compiles: each block is written to a file of its own
//    under scripts/.data/doc-blocks (gitignored, outside lint and test globs) and one `tsc --noEmit` run checks
//    them all with the repository's strict settings (scripts/doc-blocks/tsconfig.json), after a shared preamble
//    (scripts/doc-blocks/preamble.d.ts) declaring the names blocks use without defining them.
//    Conventions: a block is a module (its names never clash with another block's); its imports of the app's
//    own files (relative paths) are dropped, the preamble declares those names; ```ts ignore skips a block.
// 2. Every relative link of those files points at a file that exists, and every #anchor at a heading of the
//    target (GitHub's slugs). No network: links with a scheme (https:, mailto:) are not checked.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const blocksDir = join(root, 'scripts/.data/doc-blocks');

const walk = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? (e.name === 'api' && dir === join(root, 'docs') ? [] : walk(join(dir, e.name))) : e.name.endsWith('.md') ? [join(dir, e.name)] : [],
  );
const files = [join(root, 'README.md'), ...walk(join(root, 'docs'))];

/** Fenced blocks with their info string and first line number (1-based). */
function fences(text) {
  const out = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,})(.*)$/.exec(lines[i]);
    if (!open) continue;
    const [, indent, ticks, info] = open;
    const body = [];
    let j = i + 1;
    for (; j < lines.length && !new RegExp(`^\\s*${ticks}\\s*$`).test(lines[j]); j++) body.push(lines[j].startsWith(indent) ? lines[j].slice(indent.length) : lines[j]);
    out.push({ info: info.trim(), line: i + 1, endLine: j + 1, body: body.join('\n') });
    i = j;
  }
  return out;
}

// ---- 1. TypeScript blocks ----
rmSync(blocksDir, { recursive: true, force: true });
mkdirSync(blocksDir, { recursive: true });
const TESTING_QUEUE = "declare const queue: import('nestjs-pg-queue/testing').QueueTestKit;\n";
const written = new Map(); // block file -> "README.md:12"
let skipped = 0;
for (const file of files) {
  const rel = relative(root, file);
  for (const block of fences(readFileSync(file, 'utf8'))) {
    const [lang, ...flags] = block.info.split(/\s+/);
    if (lang !== 'ts' && lang !== 'typescript') continue;
    if (flags.includes('ignore')) {
      skipped++;
      continue;
    }
    // Keep line numbers: a dropped import becomes an empty line.
    const code = block.body
      .split('\n')
      .map((l) => (/^import\s.*\sfrom\s+['"]\.{1,2}\//.test(l) ? '' : l))
      .join('\n');
    const name = `${rel.replace(/[/.]/g, '_')}_L${block.line + 1}.ts`;
    // docs/testing.md's blocks continue its first one, where `queue` is the test kit, not the QueueService.
    const own = rel === 'docs/testing.md' && !/\b(const|let|var)\s+queue\b/.test(code) ? TESTING_QUEUE : '';
    writeFileSync(join(blocksDir, name), `${code}\nexport {};\n${own}`);
    written.set(name, `${rel}:${block.line + 1}`);
  }
}

const require = createRequire(import.meta.url);
const tsc = join(dirname(require.resolve('typescript/package.json')), 'bin/tsc');
let tscFailed = false;
try {
  execFileSync(process.execPath, [tsc, '-p', join(root, 'scripts/doc-blocks/tsconfig.json'), '--pretty', 'false'], { cwd: root, encoding: 'utf8' });
} catch (error) {
  tscFailed = true;
  // Point each error at the Markdown file and line it comes from.
  const out = String(error.stdout ?? '') + String(error.stderr ?? '');
  for (const line of out.split('\n').filter(Boolean)) {
    const m = /^scripts\/\.data\/doc-blocks\/([^()]+)\((\d+),(\d+)\): (.*)$/.exec(line);
    if (!m) {
      console.error(line);
      continue;
    }
    const [file, blockLine] = written.get(m[1]).split(':');
    console.error(`${file}:${Number(blockLine) + Number(m[2]) - 1}:${m[3]}: ${m[4]}`);
  }
}

// ---- 2. Relative links and anchors ----
/** GitHub's heading slugs: lower case, punctuation dropped (not - and _), spaces to -, duplicates -1, -2. */
function anchors(file) {
  const seen = new Map();
  const out = new Set();
  const text = readFileSync(file, 'utf8');
  const inFence = new Set();
  for (const f of fences(text)) for (let l = f.line; l <= f.endLine; l++) inFence.add(l);
  text.split('\n').forEach((line, i) => {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m || inFence.has(i + 1)) return;
    const base = m[1]
      .replace(/<[^>]+>/g, '')
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n ? `${base}-${n}` : base);
  });
  return out;
}

const broken = [];
for (const file of files) {
  const rel = relative(root, file);
  const text = readFileSync(file, 'utf8');
  const inFence = new Set();
  for (const f of fences(text)) for (let l = f.line; l <= f.endLine; l++) inFence.add(l);
  text.split('\n').forEach((line, i) => {
    if (inFence.has(i + 1)) return;
    const noCode = line.replace(/`[^`]*`/g, '');
    for (const m of noCode.matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
      const [path, anchor] = target.split('#');
      const dest = path ? resolve(dirname(file), decodeURIComponent(path)) : file;
      if (!existsSync(dest)) {
        broken.push(`${rel}:${i + 1}: ${target}: no such file`);
        continue;
      }
      if (anchor !== undefined && existsSync(dest) && dest.endsWith('.md') && statSync(dest).isFile() && !anchors(dest).has(anchor.toLowerCase())) {
        broken.push(`${rel}:${i + 1}: ${target}: no heading #${anchor} in ${relative(root, dest)}`);
      }
    }
  });
}
for (const b of broken) console.error(b);

if (tscFailed || broken.length) {
  console.error(`docs check failed: ${tscFailed ? 'code blocks do not compile (above)' : ''}${tscFailed && broken.length ? '; ' : ''}${broken.length ? `${broken.length} broken links` : ''}`);
  process.exit(1);
}
console.log(`docs check: ${written.size} TypeScript blocks compile (${skipped} marked ignore), links and anchors of ${files.length} files resolve`);
