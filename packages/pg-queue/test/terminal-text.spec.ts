import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, Module, type INestApplicationContext, type LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { JobHandler, PgQueueModule, QueueService, type Job } from 'nestjs-pg-queue';
import { createTestDatabase } from '@internal/pg-harness';
import { terminalLine, terminalText } from '../src/utils/terminal-text.js';
import { buildCli, runCli } from './support/run-cli.js';
import { startApp, waitFor } from './support/test-app.js';

// Issue 39 item 16: user-controlled text (flow names, reasons, errors, step names, unique keys, payloads) reaches a
// terminal through the CLI and through the library's log lines. Its control sequences must show as escapes, never
// act: an OSC 52 clipboard write, a line erase that makes "failed" read "completed", a one-character CSI (0x9B), a
// right-to-left override. The CLI is the real binary; the logs are what the app's logger receives.

const OSC52 = '\u001b]52;c;ZXZpbA==\u0007';
const ERASE = '\r\u001b[2K';
const CSI = '\u009b2K';
const RLO = '\u202e';
const HOSTILE = `${OSC52}${ERASE}completed${CSI}${RLO}`;
/** Anything a terminal acts on: C0 but line feed, DEL, C1, bidi overrides and isolates. */
// eslint-disable-next-line no-control-regex -- what must never reach the terminal
const ACTS = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

const actsOnTerminal = (text: string) => ACTS.exec(text)?.[0];

describe('terminal text (the helper)', () => {
  it('shows every control sequence as an escape; line feeds kept in text, escaped on one line', () => {
    expect(terminalText(`a${OSC52}b\nc${ERASE}d${CSI}${RLO}`)).toBe('a\\u001b]52;c;ZXZpbA==\\u0007b\nc\\r\\u001b[2Kd\\u009b2K\\u202e');
    expect(terminalLine('two\nlines\tand a tab')).toBe('two\\nlines\\tand a tab');
    expect(terminalText('plain: é, 日本, emoji 🎉, tab\tkept')).toBe('plain: é, 日本, emoji 🎉, tab\tkept');
    // The escapes are JSON escapes: a JSON line stays JSON.
    expect(JSON.parse(terminalText(`"${CSI}"`))).toBe(CSI);
  });
});

describe('pg-queue: user text reaches the terminal escaped', () => {
  let url: string;
  let sql: pg.Pool;
  let app: INestApplicationContext;
  let flowId: string;
  let jobId: string;
  const cli = (...args: string[]) => runCli(args, { DATABASE_URL: url, FORCE_COLOR: '0' });

  beforeAll(async () => {
    await buildCli();
    url = await createTestDatabase('terminal_text');
    sql = new pg.Pool({ connectionString: url, max: 2 });
    app = await startApp(url, { queue: { workers: false, maintenance: { enabled: false } } });
    const queue = app.get(QueueService);
    const flow = await queue.enqueueFlow({
      name: `evil${HOSTILE}`,
      jobs: [
        { ref: 'charge', queue: 'payments', payload: { note: `pay${HOSTILE}` } },
        { ref: 'ship', queue: 'shipping', payload: {}, dependsOn: ['charge'] },
      ],
    });
    flowId = flow.id;
    jobId = flow.jobs.charge;
    // A failed job whose error and step names carry the sequences, as a handler's throw and job.step() store them.
    await sql.query(
      `UPDATE background_jobs SET status = 'failed', attempts = 1, finished_at = now(), last_error = $2,
              steps = jsonb_build_array(jsonb_build_object('name', $3::text, 'result', $4::text, 'attempt', 1, 'at', now()))
       WHERE id = $1`,
      [jobId, `Error: failed${ERASE}completed\n    at handler (${OSC52})`, `step${HOSTILE}`, `result${HOSTILE}`],
    );
    await sql.query(`UPDATE background_flows SET reason = $2 WHERE id = $1`, [flowId, `reason${HOSTILE}`]);
  }, 180_000);

  afterAll(async () => {
    await app?.close();
    await sql?.end();
  });

  it('flows list, flows show, jobs list, jobs show (tables, fields, JSON): escaped, readable', async () => {
    const outputs: Record<string, string> = {};
    for (const args of [
      ['flows', 'list'],
      ['flows', 'list', '--json'],
      ['flows', 'show', flowId],
      ['flows', 'show', flowId, '--json'],
      ['jobs', 'list', '--status', 'failed'],
      ['jobs', 'list', '--status', 'failed', '--json'],
      ['jobs', 'show', jobId],
      ['jobs', 'show', jobId, '--json'],
    ]) {
      const result = await cli(...args);
      expect({ args, code: result.code, stderr: result.stderr }).toEqual({ args, code: 0, stderr: '' });
      outputs[args.join(' ')] = result.stdout;
    }
    for (const [command, stdout] of Object.entries(outputs)) expect({ command, acts: actsOnTerminal(stdout) }).toEqual({ command, acts: undefined });
    // What was there, shown: the escapes in place of the sequences.
    expect(outputs['flows list']).toContain('evil\\u001b]52;c;ZXZpbA==\\u0007\\r\\u001b[2Kcompleted\\u009b2K\\u202e');
    expect(outputs['flows show ' + flowId]).toMatch(/^name +evil\\u001b\]52;c;ZXZpbA==\\u0007\\r\\u001b\[2Kcompleted/m);
    expect(outputs['flows show ' + flowId]).toMatch(/^reason +reason\\u001b\]52/m);
    expect(outputs['jobs show ' + jobId]).toContain('step\\u001b]52;c;ZXZpbA==\\u0007\\r\\u001b[2Kcompleted');
    expect(outputs['jobs show ' + jobId]).toContain('Error: failed\\r\\u001b[2Kcompleted\n    at handler (\\u001b]52;c;ZXZpbA==\\u0007)');
    // JSON output stays JSON, and reads back the original text.
    expect(JSON.parse(outputs[`flows show ${flowId} --json`]).name).toBe(`evil${HOSTILE}`);
    expect(JSON.parse(outputs['flows list --json'].trim().split('\n')[0]).name).toBe(`evil${HOSTILE}`);
    expect(JSON.parse(outputs[`jobs show ${jobId} --json`]).steps[0].name).toBe(`step${HOSTILE}`);
  }, 120_000);

  it("errors and confirmations that quote the user's text: escaped on stderr", async () => {
    // Not a schedule name: refused, quoting it (JSON.stringify escapes C0 controls, not C1 or bidi ones).
    const missing = await cli('schedules', 'pause', `nightly${CSI}${RLO}`);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('nightly\\u009b2K\\u202e');
    expect(actsOnTerminal(missing.stderr)).toBeUndefined();
    // The question of a cancel names the flow: refused without a terminal, the summary quoted in the error.
    const cancel = await cli('flows', 'cancel', flowId);
    expect(cancel.code).toBe(2);
    expect(cancel.stderr).toContain('evil\\u001b]52');
    expect(actsOnTerminal(cancel.stderr)).toBeUndefined();
    // A commander error about an argument.
    const option = await cli('jobs', 'list', '--status', `queued${OSC52}${CSI}`);
    expect(option.code).toBe(2);
    expect(option.stderr).toContain('queued\\u001b]52;c;ZXZpbA==\\u0007');
    expect(actsOnTerminal(option.stderr)).toBeUndefined();
  }, 120_000);
});

let thrown = '';

@Injectable()
class HostileHandlers {
  @JobHandler('hostile', { maxAttempts: 1 })
  async run(job: Job<{ n: number }>) {
    throw new Error(thrown || `job ${job.id}`);
  }
}

describe("the library's log lines: user text escaped before any logger sees it", () => {
  it('a failure whose error message holds an OSC 52 write and a line erase is logged with them escaped', async () => {
    const url = await createTestDatabase('terminal_text_logs');
    const lines: string[] = [];
    const keep = (message: unknown, ...rest: unknown[]) => lines.push([message, ...rest].map(String).join(' | '));
    const logger: LoggerService = { log: keep, warn: keep, error: keep, debug: keep, verbose: keep, fatal: keep };
    @Module({ imports: [PgQueueModule.forRoot({ connection: url, pollIntervalMs: 100 })], providers: [HostileHandlers] })
    class LogsModule {}
    const app = await NestFactory.createApplicationContext(LogsModule, { logger, abortOnError: false });
    await app.init();
    try {
      thrown = `failed${ERASE}completed ${OSC52}${CSI}`;
      const id = await app.get(QueueService).enqueue('hostile', { n: 1 });
      const line = await waitFor('the failure logged', async () => lines.find((l) => l.includes(`job ${id} (hostile) failed for good`)));
      expect(line).toContain('Error: failed\\r\\u001b[2Kcompleted \\u001b]52;c;ZXZpbA==\\u0007\\u009b2K');
      expect(lines.map(actsOnTerminal).filter((c) => c !== undefined)).toEqual([]);
      // The stored error is the handler's own text (escaping is for terminals, not for the row).
      const sql = new pg.Pool({ connectionString: url, max: 1 });
      try {
        expect((await sql.query<{ e: string }>('SELECT last_error AS e FROM background_jobs WHERE id = $1', [id])).rows[0].e).toContain(`failed${ERASE}completed`);
      } finally {
        await sql.end();
      }
    } finally {
      await app.close();
    }
  }, 60_000);
});
