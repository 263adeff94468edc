// The webhook fan-out's progress (GET /admin/v1/webhook-fan-out,
// docs/operations.md, "The fan-out's group"): its group's checkpoint and the oldest cart event after
// it, in red once that event is older than the threshold. The fan-out never parks: an event it keeps
// failing on shows as an age that grows.
import { html, number, time, useAdminRead } from './admin.js';

const POLL_MS = 10_000;

const STATES = {
  current: 'current',
  behind: 'behind',
  absent: 'no group yet (no dispatcher has started)',
};

function OldestPending({ event }) {
  if (!event) return 'none';
  return html`<code>${event.type}</code> of <code>${event.stream_id}</code> at ${number(event.position)},
    ${number(event.age_seconds)} s old (recorded ${time(event.recorded_at)})`;
}

export function FanOut({ session, onUnauthorized }) {
  const read = useAdminRead(session, '/webhook-fan-out', 'fan_out', onUnauthorized, POLL_MS);
  const f = read.value;
  return html`
    <section aria-labelledby="fan-out-title">
      <h2 id="fan-out-title">Webhook fan-out</h2>
      <p class="hint">How far the dispatchers have scheduled the webhooks of cart events. A cart event whose
        fan-out fails is tried again until it succeeds, never parked; the fan-out is behind, in red, once the
        oldest cart event not yet handled is older than ${f ? number(f.behind_after_seconds / 60) : 5} minutes.
        Updated every 10 seconds.</p>
      ${read.error && html`<p class="error" role="alert">Could not read the fan-out: ${read.error}</p>`}
      ${
        f === null
          ? html`<p>Loading…</p>`
          : html`
            <dl class="totals" data-fan-out=${f.state}>
              <div><dt>Group</dt><dd><code>${f.group}</code></dd></div>
              <div><dt>State</dt><dd><span class=${`state state-${f.state}`}>${STATES[f.state] ?? f.state}</span></dd></div>
              <div><dt>Checkpoint</dt><dd>${f.checkpoint === null ? '—' : number(f.checkpoint)}</dd></div>
              <div><dt>Oldest pending</dt><dd><${OldestPending} event=${f.oldest_pending} /></dd></div>
              <div><dt>Parked</dt><dd class=${f.parked > 0 ? 'error' : ''}>${number(f.parked)}</dd></div>
              <div><dt>Consumers</dt><dd>${number(f.consumers)}</dd></div>
            </dl>`
      }
    </section>`;
}
