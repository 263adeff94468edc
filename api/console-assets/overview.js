// The overview: what is in trouble first (how many webhook subscriptions are failing, how many
// projections lag, as the admin API judges them: docs/operations.md, "Health"), then every
// projection's state, checkpoint, lag and rebuild (projections.js), the webhook fan-out's progress
// (fan-out.js), and every webhook subscription's health over the last hour or day (health.js).
import { useState } from 'preact/hooks';
import { html, number, Truncated, useAdminRead, webhookHref } from './admin.js';
import { FanOut } from './fan-out.js';
import { Health, WindowChoice } from './health.js';
import { POLL_MS as PROJECTIONS_POLL_MS, Projections } from './projections.js';

const POLL_MS = 10_000;
const plural = (n, one, many) => `${number(n)} ${n === 1 ? one : many}`;

/** A threshold in seconds as an operator set it: `30 seconds`, `15 minutes`, `2 hours`, `90 seconds`. */
export const duration = (s) =>
  s >= 3600 && s % 3600 === 0
    ? plural(s / 3600, 'hour', 'hours')
    : s >= 60 && s % 60 === 0
      ? plural(s / 60, 'minute', 'minutes')
      : plural(s, 'second', 'seconds');

/**
 * The counts at the top: failing subscriptions and lagging projections, each linking to its section.
 * `judged` and `projections` are null while their read fails: the count is then unknown, not the last
 * one read (docs/operations.md, "The console").
 */
function TroubleSummary({ judged, projections, healthFailed, projectionsFailed }) {
  if (!judged && !healthFailed) return html`<p>Loading…</p>`;
  const failing = judged?.failing ?? 0;
  const lagging = projections?.lagging ?? 0;
  const known = judged && (projections || !projectionsFailed);
  const unknown = (what, why) => html`<span class="muted">${what}: unknown (${why})</span>`;
  return html`
    <section aria-labelledby="trouble-title" class=${`summary ${failing + lagging > 0 ? 'summary-trouble' : known ? 'summary-ok' : ''}`}>
      <h2 id="trouble-title">Trouble</h2>
      <ul>
        ${
          judged
            ? html`<li data-failing=${failing}>${
                failing > 0
                  ? html`<a href="#health-title" class="mark mark-failing">${failing} of ${judgedCount(judged)} failing</a>`
                  : html`<span class="mark mark-ok">No subscription failing</span>`
              }<span class="muted"> (failing: too many of its recent attempts did not deliver, or a delivery has been queued
                more than ${duration(judged.thresholds.oldest_queued_seconds)}; each subscription says which, with the figures)</span>
                <${Truncated} judged=${judged} /></li>`
            : html`<li data-failing="unknown">${unknown('Subscriptions failing', 'their health cannot be read')}</li>`
        }
        ${
          projections
            ? html`<li data-lagging=${lagging}>${
                lagging > 0
                  ? html`<a href="#projections-title" class="mark mark-lagging">${plural(lagging, 'projection', 'projections')} lagging</a>`
                  : html`<span class="mark mark-ok">No projection lagging</span>`
              }<span class="muted"> (lagging: its oldest event not applied is more than ${projections.thresholds.projection_lag_seconds} s old)</span></li>`
            : projectionsFailed &&
              html`<li data-lagging="unknown">${unknown('Projections lagging', 'the projections cannot be read')}</li>`
        }
      </ul>
    </section>`;
}

/** The subscriptions judged; past the ones the admin API judges (`truncated`), of the first ones. */
const judgedCount = (judged) =>
  `${judged.truncated ? 'the first ' : ''}${plural(judged.subscriptions.length, 'subscription', 'subscriptions')}`;

/**
 * A card for each subscription with its health; `judged` is the last list read, `marked` whether it
 * is the answer to the newest read (while that read fails, no card is marked failing).
 */
function WebhookHealth({ session, judged, marked, onUnauthorized }) {
  const [window, setWindow] = useState('1h');
  const webhooks = judged?.subscriptions ?? null;
  return html`
    <section aria-labelledby="health-title">
      <h2 id="health-title">Webhook health</h2>
      <p class="hint">Each subscription's deliveries by outcome, the attempts' latency and its queue, updated
        every 10 seconds and after every change made here. Its deliveries and attempts are under Webhooks.</p>
      <${WindowChoice} window=${window} onChange=${setWindow} />
      ${
        webhooks === null
          ? html`<p>Loading…</p>`
          : webhooks.length === 0
            ? html`<p class="muted">No webhook subscriptions.</p>`
            : webhooks.map(
                (w) => html`
                  <article key=${w.webhook_id} class=${`card ${marked && w.status === 'failing' ? 'card-failing' : ''}`}
                    aria-label=${`Health of ${w.url}`} data-webhook=${w.webhook_id} data-status=${marked ? w.status : undefined}>
                    <h3><code>${w.url}</code> ${w.enabled ? '' : html`<span class="muted">(disabled)</span>`}</h3>
                    <p class="muted">Subscription <a href=${webhookHref(w.webhook_id)}><code>${w.webhook_id}</code></a></p>
                    <${Health} session=${session} webhook=${w} window=${window} onUnauthorized=${onUnauthorized} />
                  </article>`,
              )
      }
    </section>`;
}

export function Overview({ session, onUnauthorized }) {
  const judged = useAdminRead(session, '/webhook-health', null, onUnauthorized, POLL_MS);
  const projections = useAdminRead(session, '/projections', null, onUnauthorized, PROJECTIONS_POLL_MS);
  return html`
    ${judged.error && html`<p class="error" role="alert">Could not read the subscriptions' health: ${judged.error}</p>`}
    <${TroubleSummary} judged=${judged.error ? null : judged.value} projections=${projections.error ? null : projections.value}
      healthFailed=${Boolean(judged.error)} projectionsFailed=${Boolean(projections.error)} />
    <${Projections} session=${session} read=${projections} />
    <${FanOut} session=${session} onUnauthorized=${onUnauthorized} />
    <${WebhookHealth} session=${session} judged=${judged.value} marked=${!judged.error} onUnauthorized=${onUnauthorized} />`;
}
