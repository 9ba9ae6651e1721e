import { formatCount } from './format.js';
import { html, type HtmlValue } from './html.js';
import { actionForm, type PageContext } from './layout.js';

/** A fair queue's weights as its page shows them (README: "Fair share across keys"). */
export interface QueueWeights {
  /** The handler's `fairness` option in this process; undefined: no handler of the queue runs here. */
  option: { defaultWeight: number; weights: Record<string, number> } | undefined;
  /** The weights stored at runtime, by key (the first WEIGHTS_SHOWN), and whether there are more. */
  stored: [string, number][];
  more: boolean;
}

/** The weight form's fields, carried through the confirmation page of a browser without JavaScript. */
export const WEIGHT_FIELDS = ['weightKey', 'weight'] as const;

/** What a change of one key's weight asks before it is stored; `weight` null removes the stored weight. */
export function weightQuestion(queue: string, key: string, weight: number | null): string {
  return weight === null
    ? `Remove the stored weight of key ${key} in queue ${queue}? It weighs what the fairness option says again, from every process's next claim.`
    : `Set the weight of key ${key} in queue ${queue} to ${weight}? Every process's next fair claim shares by it.`;
}

/**
 * The queue page's fair share section: the default weight and the option's weights (when a handler of the queue runs
 * in this process), the weights stored at runtime, and (full access) a form that sets one key's weight and a button per
 * stored key that removes it (POST queues/:name/weights, through QueueService.setFairnessWeights).
 */
export function queueWeightsSection(ctx: PageContext, queue: string, w: QueueWeights): HtmlValue {
  const q = encodeURIComponent(queue);
  const option = w.option
    ? html`<p data-field="default-weight">A key without a weight of its own weighs <strong>${String(w.option.defaultWeight)}</strong> (the fairness option)${
        Object.keys(w.option.weights).length ? html`; the option's weights: ${Object.entries(w.option.weights).map(([k, n], i) => html`${i > 0 ? ', ' : ''}<code>${k}</code> ${String(n)}`)}` : null
      }. A stored weight overrides both.</p>`
    : html`<p class="muted" data-field="default-weight">The default weight is the fairness option's, not known to this process (no handler of this queue runs here). A stored weight overrides it.</p>`;
  const rows = w.stored.map(
    ([key, weight]) => html`<tr data-weight-key="${key}"><th scope="row"><code>${key}</code></th><td data-label="weight">${String(weight)}</td><td>${actionForm(ctx, `/queues/${q}/weights`, 'Remove', weightQuestion(queue, key, null), { weightKey: key, weight: 'default' }, true)}</td></tr>`,
  );
  const stored = w.stored.length
    ? html`<table class="weights stack" data-field="weights"><thead><tr><th>Key</th><th>Stored weight</th><th></th></tr></thead><tbody>${rows}</tbody></table>${
        w.more ? html`<p class="muted">The first ${formatCount(w.stored.length)} keys by name; <code>pg-queue weights ${queue}</code> lists them all.</p>` : null
      }`
    : html`<p class="muted" data-field="weights">No weight stored at runtime.</p>`;
  const form = ctx.canAct
    ? html`<form method="post" action="${ctx.base}/queues/${q}/weights" class="limits" data-weights-form data-confirm="Store this weight for queue ${queue}? Every process's next fair claim shares by it.">
<input type="hidden" name="_csrf" value="${ctx.csrfToken}"><input type="hidden" name="return" value="${ctx.here}">
<label>key <input name="weightKey" size="16" autocomplete="off" required></label> <label>weight <input name="weight" size="8" autocomplete="off" placeholder="1 to 1000" required></label>
<button type="submit">Set weight</button>
<p class="muted">A whole number from 1 to 1000, or <code>default</code> to remove the key's stored weight.</p>
</form>`
    : null;
  return html`<section id="weights" data-slot="weights"><h2>Fair share weights</h2>${option}${stored}${form}</section>`;
}
