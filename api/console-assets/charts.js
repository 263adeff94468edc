// A time-series chart for the console: uPlot (a few KB, canvas, served from node_modules like Preact)
// drawn into a figure that says in words what it shows, with the legend as HTML (uPlot's own legend
// is off: a table without headers). uPlot sets its elements' styles from script, which the console's
// Content-Security-Policy allows (it forbids style attributes and inline <style> only).
// Counts are bars on an axis of whole numbers (a quiet hour reads 0, 1, 2, never 0.5); the time axis
// is in the zone the whole page shows times in, and says which (docs/operations.md, "The console").
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { html, number, ZONE } from './admin.js';

const HEIGHT = 200;

/** Steps between a count axis's ticks: whole numbers only. */
const COUNT_STEPS = [
  1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1e3, 2e3, 2.5e3, 5e3, 1e4, 2e4, 2.5e4, 5e4, 1e5, 2e5, 2.5e5,
  5e5, 1e6,
];

/** The value axis: counts from 0 to at least 1 in whole steps, anything else from 0 as uPlot spaces it. */
function valueAxis(unit) {
  const counts = unit === 'count';
  return {
    scale: { range: (_u, min, max) => [0, counts ? Math.max(1, Math.ceil(max)) : Math.max(1, max, min)] },
    axis: {
      stroke: '#57606a',
      label: unit,
      size: 56,
      ...(counts ? { incrs: COUNT_STEPS, values: (_u, splits) => splits.map((v) => number(v)) } : {}),
    },
  };
}

/**
 * `times`: the intervals' starts (ISO); `series`: [{label, color, swatch, values, kind}], null values
 * are gaps. `kind`: 'line' (with its points, so a lone value shows) or 'bars' (`width`: the share of
 * an interval, so that narrower bars drawn later nest inside wider ones); `unit`: 'count' for an axis
 * of whole numbers, else the values' unit (`ms`); `summary`: what the chart shows, for those who
 * cannot see it.
 */
export function Chart({ title, summary, unit, times, series }) {
  const box = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const element = box.current;
    const seconds = times.map((t) => Date.parse(t) / 1000);
    // Half an interval on either side, so the first and last bars show whole.
    const half = seconds.length > 1 ? (seconds[1] - seconds[0]) / 2 : 30;
    const y = valueAxis(unit);
    const options = {
      width: Math.max(240, element.clientWidth),
      height: HEIGHT,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), ZONE),
      scales: { x: { time: true, range: (_u, min, max) => [min - half, max + half] }, y: y.scale },
      axes: [{ stroke: '#57606a', label: `Time (${ZONE})`, labelSize: 24 }, y.axis],
      series: [
        {},
        ...series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 2,
          spanGaps: false,
          points: { show: s.kind === 'line', size: 5, fill: s.color },
          ...(s.kind === 'bars' ? { paths: uPlot.paths.bars({ size: [s.width, 48] }), fill: s.color } : {}),
        })),
      ],
    };
    plot.current = new uPlot(options, [seconds, ...series.map((s) => s.values)], element);
    const resize = new ResizeObserver(() =>
      plot.current?.setSize({ width: Math.max(240, element.clientWidth), height: HEIGHT }),
    );
    resize.observe(element);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [times, series, unit]);
  return html`
    <figure class="chart">
      <figcaption>${title}</figcaption>
      <ul class="legend">
        ${series.map((s) => html`<li key=${s.label}><span class=${`swatch ${s.swatch}`}></span>${s.label}</li>`)}
      </ul>
      <div class="plot" ref=${box} role="img" aria-label=${summary}></div>
    </figure>`;
}
