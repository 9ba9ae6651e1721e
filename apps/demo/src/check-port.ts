import { createServer } from 'node:net';

/**
 * Why the HTTP port cannot be listened on, in one line naming PORT; undefined when it is free. Checked
 * before anything starts, so that a taken port costs no database start-up and enqueues no jobs.
 */
export function portProblem(port: number): Promise<string | undefined> {
  if (port === 0) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      // Most often the taker is a demo already running: a second one on another port shares its database.
      if (error.code === 'EADDRINUSE') resolve(`port ${port} is already in use: stop what listens there, or choose another port with PORT (e.g. PORT=${port === 65_535 ? 3001 : port + 1} npm start; a second demo on the same data folder shares the running one's database)`);
      else resolve(`cannot listen on port ${port} (${error.code ?? error.message}): choose another port with PORT (e.g. PORT=3001 npm start)`);
    });
    // The same address app.listen(port) binds: every interface.
    probe.listen(port, () => probe.close(() => resolve(undefined)));
  });
}
