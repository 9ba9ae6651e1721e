// Texts of the thread handlers' errors, shared by the code and its tests.

export const THREAD_ENTRY_MISSING = (queue: string, entry: string) =>
  `@JobHandler('${queue}', { thread }): the library's thread entry ${entry} is not there; thread handlers run from the compiled library (its dist), not from its TypeScript source.`;

export const THREAD_CONFLICT = (queue: string, other: string, why: string) =>
  `@JobHandler('${queue}'): thread cannot be used with ${other} (${why}).`;
