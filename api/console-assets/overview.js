// The overview: every projection's state, checkpoint, lag and rebuild (projections.js), the webhook
// fan-out's progress (fan-out.js), and every webhook subscription's health over the last hour or day
// (health.js).
import { useState } from 'preact/hooks';
import { html, useAdminRead } from './admin.js';
import { FanOut } from './fan-out.js';
import { Health, WindowChoice } from './health.js';
import { Projections } from './projections.js';

function WebhookHealth({ session, onUnauthorized }) {
  const read = useAdminRead(session, '/webhooks?limit=100', 'webhooks', onUnauthorized);
  const [window, setWindow] = useState('1h');
  const webhooks = read.value;
  return html`
    <section aria-labelledby="health-title">
      <h2 id="health-title">Webhook health</h2>
      <p class="hint">Each subscription's deliveries by outcome, the attempts' latency and its queue, updated
        every 10 seconds. Its deliveries and attempts are under Webhooks.</p>
      <${WindowChoice} window=${window} onChange=${setWindow} />
      ${read.error && html`<p class="error" role="alert">Could not read the subscriptions: ${read.error}</p>`}
      ${
        webhooks === null
          ? html`<p>Loading…</p>`
          : webhooks.length === 0
            ? html`<p class="muted">No webhook subscriptions.</p>`
            : webhooks.map(
                (w) => html`
                  <article key=${w.webhook_id} class="card" aria-label=${`Health of ${w.url}`}>
                    <h3><code>${w.url}</code> ${w.enabled ? '' : html`<span class="muted">(disabled)</span>`}</h3>
                    <${Health} session=${session} webhook=${w} window=${window} onUnauthorized=${onUnauthorized} />
                  </article>`,
              )
      }
    </section>`;
}

export function Overview({ session, onUnauthorized }) {
  return html`
    <${Projections} session=${session} onUnauthorized=${onUnauthorized} />
    <${FanOut} session=${session} onUnauthorized=${onUnauthorized} />
    <${WebhookHealth} session=${session} onUnauthorized=${onUnauthorized} />`;
}
