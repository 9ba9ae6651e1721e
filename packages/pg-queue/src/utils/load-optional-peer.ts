import { PgQueueError } from '../errors/pg-queue.error.js';
import { OPTIONAL_PEER_MISSING } from '../pg-queue.messages.js';

/**
 * Optional peer dependencies are imported when an option asks for them, at boot, never at the package's own
 * import: an app without prom-client or the OpenTelemetry API loads and runs unchanged.
 */
export async function loadOptionalPeer<T>(pkg: string, what: string, range: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') throw new PgQueueError(OPTIONAL_PEER_MISSING(pkg, what, range), { cause: error });
    throw error;
  }
}
