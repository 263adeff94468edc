// A webhook subscription's health over the last hour or day: FAILING with why when the admin API judges
// it so, deliveries by outcome, the latency p50 and p99 of the attempts that got an answer (no timeout
// or refused connection), the queue's depth, drawn as charts (counts as bars),
// and the oldest delivery still queued, linked (GET /admin/v1/webhooks/{id}/health, docs/webhooks.md,
// "Health"; docs/operations.md, "Health").
import { useMemo } from 'preact/hooks';
import { deliveryHref, html, number, Trouble, time, useAdminRead } from './admin.js';
import { Chart } from './charts.js';

const POLL_MS = 10_000;
export const WINDOWS = [
  { id: '1h', label: 'Last hour', per: 'minute' },
  { id: '24h', label: 'Last day', per: '15 minutes' },
];

/** Attempts that did not deliver: failed, gone, retry after, interrupted. */
const failedAttempts = (tally) =>
  Object.entries(tally.attempts).reduce((sum, [outcome, n]) => (outcome === 'delivered' ? sum : sum + n), 0);

const ms = (value) => (value === null || value === undefined ? '—' : `${number(value)} ms`);

/** The charts' series, built once per answer. */
function seriesOf(h) {
  const i = h.intervals;
  return {
    times: i.map((x) => x.from),
    outcomes: [
      {
        label: 'Delivered',
        color: '#1a7f37',
        swatch: 'delivered',
        kind: 'bars',
        width: 0.9,
        values: i.map((x) => x.attempts.delivered),
      },
      {
        label: 'Failed attempts',
        color: '#cf222e',
        swatch: 'failed',
        kind: 'bars',
        width: 0.6,
        values: i.map(failedAttempts),
      },
      {
        label: 'Parked',
        color: '#9a6700',
        swatch: 'parked',
        kind: 'bars',
        width: 0.3,
        values: i.map((x) => x.parked),
      },
    ],
    latency: [
      {
        label: 'p50',
        color: '#0969da',
        swatch: 'p50',
        kind: 'line',
        values: i.map((x) => x.latency_ms?.p50 ?? null),
      },
      {
        label: 'p99',
        color: '#8250df',
        swatch: 'p99',
        kind: 'line',
        values: i.map((x) => x.latency_ms?.p99 ?? null),
      },
    ],
    queue: [
      {
        label: 'Queued',
        color: '#57606a',
        swatch: 'queued',
        kind: 'bars',
        width: 0.9,
        values: i.map((x) => x.queue_depth),
      },
    ],
  };
}

function Totals({ health: h }) {
  const t = h.totals;
  const oldest = h.queue.oldest;
  return html`
    <dl class="totals">
      <div><dt>Scheduled</dt><dd>${number(t.scheduled)}</dd></div>
      <div><dt>Delivered</dt><dd>${number(t.attempts.delivered)}</dd></div>
      <div><dt>Failed attempts</dt><dd>${number(failedAttempts(t))}</dd></div>
      <div><dt>Parked</dt><dd>${number(t.parked)}</dd></div>
      <div><dt>Latency p50 / p99</dt><dd>${ms(t.latency_ms?.p50)} / ${ms(t.latency_ms?.p99)}</dd></div>
      <div><dt>Queued now</dt><dd>${number(h.queue.depth)}</dd></div>
      <div><dt>Oldest queued</dt><dd>${
        oldest
          ? html`<a href=${deliveryHref(oldest.delivery_id)}><code>${oldest.delivery_id}</code></a> (${oldest.status}, ${number(oldest.age_seconds)} s, scheduled ${time(oldest.scheduled_at)})`
          : 'none'
      }</dd></div>
    </dl>`;
}

/** The intervals with something in them, as a table: the charts' data in words. */
function DataTable({ health: h, per }) {
  const busy = h.intervals.filter(
    (x) => x.scheduled + x.parked + x.attempts.delivered + failedAttempts(x) > 0 || x.queue_depth > 0,
  );
  return html`
    <details class="chart-data">
      <summary>The charts' data (${busy.length} of ${h.intervals.length} intervals of a ${per} with deliveries)</summary>
      <div class="table-scroll">
        <table class="health-data">
          <thead><tr><th scope="col">From</th><th scope="col">Scheduled</th><th scope="col">Delivered</th>
            <th scope="col">Failed attempts</th><th scope="col">Parked</th><th scope="col">p50</th>
            <th scope="col">p99</th><th scope="col">Queued</th></tr></thead>
          <tbody>
            ${busy.map(
              (x) => html`
                <tr key=${x.from}><th scope="row">${time(x.from)}</th>
                  <td class="num" data-label="Scheduled">${x.scheduled}</td>
                  <td class="num" data-label="Delivered">${x.attempts.delivered}</td>
                  <td class="num" data-label="Failed attempts">${failedAttempts(x)}</td>
                  <td class="num" data-label="Parked">${x.parked}</td>
                  <td class="num" data-label="p50">${ms(x.latency_ms?.p50)}</td>
                  <td class="num" data-label="p99">${ms(x.latency_ms?.p99)}</td>
                  <td class="num" data-label="Queued">${x.queue_depth}</td></tr>`,
            )}
          </tbody>
        </table>
      </div>
    </details>`;
}

/** A subscription's health in the chosen window, read again every 10 s. */
export function Health({ session, webhook, window, onUnauthorized }) {
  const read = useAdminRead(
    session,
    `/webhooks/${webhook.webhook_id}/health?window=${window}`,
    'health',
    onUnauthorized,
    POLL_MS,
  );
  const h = read.value;
  const series = useMemo(() => (h ? seriesOf(h) : null), [h]);
  const { label, per } = WINDOWS.find((w) => w.id === window);
  if (read.error)
    return html`<p class="error" role="alert">Could not read the health of ${webhook.url}: ${read.error}</p>`;
  if (!h) return html`<p>Loading…</p>`;
  const t = h.totals;
  return html`
    <div class="health" data-health=${webhook.webhook_id} data-status=${h.status}>
      <${Trouble} judged=${h} mark="FAILING" />
      <${Totals} health=${h} />
      <div class="charts">
        <${Chart} title=${`Attempts per ${per}`} unit="count" times=${series.times} series=${series.outcomes}
          summary=${`${label}: ${t.attempts.delivered} delivered, ${failedAttempts(t)} failed attempts, ${t.parked} parked.`} />
        <${Chart} title="Latency of attempts answered" unit="ms" times=${series.times} series=${series.latency}
          summary=${`${label}: latency of the attempts that got an answer p50 ${ms(t.latency_ms?.p50)}, p99 ${ms(t.latency_ms?.p99)}.`} />
        <${Chart} title="Deliveries queued" unit="count" times=${series.times} series=${series.queue}
          summary=${`${label}: ${h.queue.depth} deliveries queued now.`} />
      </div>
      <${DataTable} health=${h} per=${per} />
    </div>`;
}

/** The window switch (last hour or day) the health panels share. */
export function WindowChoice({ window, onChange }) {
  return html`
    <fieldset class="window-choice">
      <legend>Window</legend>
      ${WINDOWS.map(
        (w) => html`
          <label key=${w.id} class="check"><input type="radio" name="health-window" value=${w.id}
            checked=${window === w.id} onChange=${() => onChange(w.id)} /> ${w.label}</label>`,
      )}
    </fieldset>`;
}
