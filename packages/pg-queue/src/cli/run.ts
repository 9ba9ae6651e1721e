import type { Command } from 'commander';
import { Connection, type GlobalOptions } from './connection.js';

/** What a command does, given its connection, positional arguments and options. */
export type Action<O> = (connection: Connection, args: string[], options: O & GlobalOptions, command: Command) => Promise<void>;

/** Wraps an action for commander: opens the connection from the global options and closes it afterwards, whatever happens. */
export type Run = <O>(action: Action<O>) => (...args: unknown[]) => Promise<void>;

export const run: Run = (action) => async (...args) => {
  const command = args.at(-1) as Command;
  const options = command.optsWithGlobals();
  const positional = args.slice(0, -2).flat() as string[];
  const connection = Connection.fromOptions(options);
  current = connection;
  try {
    await action(connection, positional, options as never, command);
  } finally {
    await connection.close();
  }
};

/** The connection of the command running, so that the error handler can mask its password. */
export let current: Connection | undefined;
