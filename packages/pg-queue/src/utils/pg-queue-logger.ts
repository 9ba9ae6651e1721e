import { Logger } from '@nestjs/common';
import { terminalText } from './terminal-text.js';

// Apart from terminal-text.ts, which the command line imports: loading @nestjs/common took 60 % of a CLI command's start.

/** A log argument: text escaped (terminalText); anything else as it is (Nest prints objects as JSON, which escapes). */
function logged(value: unknown): unknown {
  return typeof value === 'string' ? terminalText(value) : value;
}

/**
 * The library's Nest Logger: every message and argument goes through terminalText before Nest (or the app's own
 * logger, set with app.useLogger) sees it. Every log line of the library is written through one of these.
 */
export class PgQueueLogger extends Logger {
  override log(message: unknown, ...rest: unknown[]): void {
    super.log(logged(message), ...rest.map(logged));
  }

  override warn(message: unknown, ...rest: unknown[]): void {
    super.warn(logged(message), ...rest.map(logged));
  }

  override error(message: unknown, ...rest: unknown[]): void {
    super.error(logged(message), ...rest.map(logged));
  }

  override debug(message: unknown, ...rest: unknown[]): void {
    super.debug(logged(message), ...rest.map(logged));
  }

  override verbose(message: unknown, ...rest: unknown[]): void {
    super.verbose(logged(message), ...rest.map(logged));
  }

  override fatal(message: unknown, ...rest: unknown[]): void {
    super.fatal(logged(message), ...rest.map(logged));
  }
}
