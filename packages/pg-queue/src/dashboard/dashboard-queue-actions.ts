// The queue page's POSTs (queues/:name/:action): pause and resume, its limits, its fair share weights, and recording
// its events. Each is checked here (bad input: a PgQueueError, answered 400 before the confirmation) and says what it
// asks and does; the responder refuses read-only users and a missing CSRF token before any of it.
import { PgQueueError } from '../errors/pg-queue.error.js';
import { field, type AnyRequest } from './dashboard-http.js';
import { limitsChangeOf } from './dashboard-limits.js';
import type { PreparedAction } from './dashboard-responder.js';
import type { DashboardService } from './dashboard.service.js';
import { queueQuestion } from './views/confirm-questions.js';
import { recordEventsQuestion } from './views/queue-events.view.js';
import { limitsQuestion } from './views/queue-limits.view.js';
import { weightQuestion } from './views/queue-weights.view.js';

/** The weight form: a key and a weight from 1 to 1000, or `default` (null: remove the stored weight). */
function weightOf(req: AnyRequest): { key: string; weight: number | null } {
  const key = field(req, 'weightKey') ?? '';
  const text = (field(req, 'weight') ?? '').trim();
  if (key === '') throw new PgQueueError('key: give the key whose weight to set.');
  if (text === 'default') return { key, weight: null };
  if (!/^\d{1,4}$/.test(text)) throw new PgQueueError(`weight: expected a whole number from 1 to 1000, or default; got ${JSON.stringify(text.slice(0, 40))}.`);
  // QueueService.setFairnessWeights checks the range and the key again, before anything is stored.
  return { key, weight: Number(text) };
}

export function queueAction(dashboard: DashboardService, req: AnyRequest, name: string, action: string): PreparedAction {
  switch (action) {
    case 'limits': {
      const change = limitsChangeOf(req);
      return { question: limitsQuestion(name), run: async (viewer) => `Limits of queue ${name} saved: ${JSON.stringify(await dashboard.setLimits(viewer, name, change))}.`.slice(0, 280) };
    }
    case 'weights': {
      const { key, weight } = weightOf(req);
      return {
        question: weightQuestion(name, key, weight),
        run: async (viewer) => {
          await dashboard.setWeight(viewer, name, key, weight);
          return (weight === null ? `Queue ${name}: the stored weight of key ${key} removed.` : `Queue ${name}: key ${key} weighs ${weight}.`).slice(0, 280);
        },
      };
    }
    case 'record-events':
    case 'stop-events': {
      const on = action === 'record-events';
      return {
        question: recordEventsQuestion(name, on),
        run: async (viewer) => {
          const recording = await dashboard.recordEvents(viewer, name, on);
          return `Queue ${name} ${on ? 'records' : 'no longer records'} events (recording: ${recording.join(', ') || 'none'}).`.slice(0, 280);
        },
      };
    }
    case 'pause':
    case 'resume':
      return {
        question: queueQuestion(action, name),
        run: async (viewer) => {
          await dashboard.queueAction(viewer, name, action);
          return `Queue ${name} ${action}d.`;
        },
      };
    default:
      throw new PgQueueError(`Unknown action ${JSON.stringify(action)}.`);
  }
}
