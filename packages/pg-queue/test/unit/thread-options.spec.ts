import { describe, expect, it } from '@jest/globals';
import { fileURLToPath } from 'node:url';
import { resolveHandlerOptions } from '../../src/utils/resolve-options.js';

// A thread handler's options, checked at boot (resolveHandlerOptions runs at discovery): each bad one names the problem.

const file = fileURLToPath(import.meta.url); // any file that exists
const resolve = (thread: unknown, more: object = {}) => () => resolveHandlerOptions('img', { thread, ...more } as never);

describe('thread handler options', () => {
  it('an absolute path or a file: URL that exists; concurrency defaults to poolSize', () => {
    const a = resolveHandlerOptions('img', { thread: { file, poolSize: 3 } });
    expect(a.thread).toEqual({ fileUrl: new URL(`file://${file}`).href, poolSize: 3, abortGraceMs: 1_000, resourceLimits: undefined });
    expect(a.concurrency).toBe(3);
    const b = resolveHandlerOptions('img', { thread: { file: new URL(import.meta.url), abortGraceMs: 0 }, concurrency: 1 });
    expect(b.thread?.poolSize).toBeGreaterThanOrEqual(1);
    expect(b.concurrency).toBe(1);
    expect(resolveHandlerOptions('img', {}).thread).toBeUndefined();
  });

  it.each([
    ['a relative path', resolve({ file: './resize.thread.js' }), /option thread.file="\.\/resize\.thread\.js": expected an absolute path or a file: URL/],
    ['a missing file', resolve({ file: '/nowhere/resize.thread.js' }), /thread.file="\/nowhere\/resize\.thread\.js": expected a file that exists/],
    ['no file', resolve({ poolSize: 2 }), /thread.file=undefined/],
    ['poolSize 0', resolve({ file, poolSize: 0 }), /thread.poolSize=0: expected an integer from 1 to 64/],
    ['poolSize 65', resolve({ file, poolSize: 65 }), /thread.poolSize=65: expected an integer from 1 to 64/],
    ['poolSize 1.5', resolve({ file, poolSize: 1.5 }), /thread.poolSize=1.5: expected an integer from 1 to 64/],
    ['abortGraceMs -1', resolve({ file, abortGraceMs: -1 }), /thread.abortGraceMs=-1/],
    ['an unknown key', resolve({ file, pool: 2 }), /Unknown @JobHandler\('img'\) thread option "pool"/],
    ['an unknown resource limit', resolve({ file, resourceLimits: { heapMb: 1 } }), /thread.resourceLimits option "heapMb"/],
    ['not an object', resolve('/x.js'), /option thread="\/x\.js": expected \{ file/],
    ['transactional', resolve({ file }, { transactional: true }), /@JobHandler\('img'\): thread cannot be used with transactional/],
    ['batch', resolve({ file }, { batch: { size: 5 } }), /@JobHandler\('img'\): thread cannot be used with batch/],
    ['concurrency above poolSize', resolve({ file, poolSize: 2 }, { concurrency: 4 }), /thread cannot be used with concurrency 4 above thread.poolSize 2/],
  ])('refuses %s', (_what, call, message) => {
    expect(call).toThrow(message);
  });
});
