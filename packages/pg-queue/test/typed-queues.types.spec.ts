import { describe, expect, it } from '@jest/globals';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';
import ts from 'typescript';

const root = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const fixtures = join(dirname(fileURLToPath(import.meta.url)), 'fixtures/typed');
const okFile = join(fixtures, 'typed-ok.ts');
const wrongFile = join(fixtures, 'typed-wrong.ts');

interface Problem {
  file: string;
  line: number;
  code: string;
  text: string;
}

/** Type-checks the fixtures with the project's own test compiler options (strict, decorators), as `tsc` would. */
function typeCheck(files: string[]): Problem[] {
  const config = ts.getParsedCommandLineOfConfigFile(join(root, 'tsconfig.test.json'), {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    },
  })!;
  const program = ts.createProgram(files, { ...config.options, noEmit: true });
  return ts.getPreEmitDiagnostics(program).map((d) => ({
    file: d.file ? d.file.fileName.slice(fixtures.length + 1) : '(global)',
    line: d.file ? d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1 : 0,
    code: `TS${d.code}`,
    text: ts.flattenDiagnosticMessageText(d.messageText, '\n'),
  }));
}

/** The `// expect-error TSxxxx` marks of a fixture: line and code. */
function expectedErrors(file: string): { line: number; code: string }[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .flatMap((text, i) => [...text.matchAll(/\/\/ expect-error (TS\d+)/g)].map((m) => ({ line: i + 1, code: m[1] })));
}

describe('typed queues: a wrong payload, handler or result is a compile error; a step result is typed as its JSON form', () => {
  it('tsc accepts the correct uses and rejects each wrong one, on its line, with the expected code', () => {
    const problems = typeCheck([okFile, wrongFile]);
    // typed-ok.ts (and the library's sources it pulls in) compile cleanly: every problem is in typed-wrong.ts.
    expect(problems.filter((p) => p.file !== 'typed-wrong.ts')).toEqual([]);
    const wrong = problems.filter((p) => p.file === 'typed-wrong.ts');
    expect(wrong.map(({ line, code }) => ({ line, code }))).toEqual(expectedErrors(wrongFile));
    const text = (line: number) => wrong.filter((p) => p.line === line).map((p) => p.text).join('\n');
    const lineOf = (fragment: string) => readFileSync(wrongFile, 'utf8').split('\n').findIndex((l) => l.includes(fragment)) + 1;
    // What each error says: the payload's or the handler's mismatch, named by the compiler.
    expect(text(lineOf('async wrongPayload') - 1)).toMatch(/phone/);
    expect(text(lineOf('async wrongResult') - 1)).toMatch(/messageId/);
    expect(text(lineOf('async fieldNotInPayload') - 1)).toMatch(/cc/);
    expect(text(lineOf('async noResult') - 1)).toMatch(/void/);
    expect(text(lineOf("{ to: 'ada@example.com' }); //"))).toMatch(/Property 'subject' is missing/);
    expect(text(lineOf('to: 42'))).toMatch(/Type 'number' is not assignable to type 'string'/);
    expect(text(lineOf('height: 2'))).toMatch(/'height' does not exist/);
    expect(text(lineOf("width: '100'"))).toMatch(/Type 'string' is not assignable to type 'number'/);
    // enqueueFlow checks each job against its queue as enqueueMany does.
    expect(text(lineOf('subject: 7'))).toMatch(/Type 'number' is not assignable to type 'string'/);
    expect(text(lineOf('width: 1, height: 2'))).toMatch(/'height' does not exist/);
    // A step's result is its JSON form: a Date property is a string there.
    expect(text(lineOf('charged.at.toISOString()'))).toMatch(/'toISOString' does not exist on type 'string'/);
  }, 120_000);
});
