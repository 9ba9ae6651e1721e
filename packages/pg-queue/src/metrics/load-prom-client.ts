import { loadOptionalPeer } from '../utils/load-optional-peer.js';
import type { PromClientModule } from './prometheus-metrics.js';

/** prom-client is CommonJS: its exports are the namespace's default (named ones are there too, when Node finds them). */
export async function loadPromClient(load: () => Promise<unknown> = () => import('prom-client')): Promise<PromClientModule> {
  const module = (await loadOptionalPeer('prom-client', 'PgQueueMetricsModule (option prometheus)', '^15.0.0', load)) as { default?: PromClientModule } & PromClientModule;
  return module.default?.Registry ? module.default : module;
}
