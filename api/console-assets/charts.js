// A time-series chart for the console: uPlot (a few KB, canvas, served from node_modules like Preact)
// drawn into a figure that says in words what it shows, with the legend as HTML (uPlot's own legend
// is off: a table without headers). uPlot sets its elements' styles from script, which the console's
// Content-Security-Policy allows (it forbids style attributes and inline <style> only).
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { html } from './admin.js';

const HEIGHT = 180;

/**
 * `times`: the intervals' starts (ISO); `series`: [{label, color, swatch, values, kind}], null values
 * are gaps. `kind`: 'line' (with its points, so a lone value shows), 'steps', or 'bars' (`width`: the
 * share of an interval, so that narrower bars drawn later nest inside wider ones); `summary`: what the
 * chart shows, for those who cannot see it.
 */
export function Chart({ title, summary, unit, times, series }) {
  const box = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const element = box.current;
    const width = Math.max(240, element.clientWidth);
    const options = {
      width,
      height: HEIGHT,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, y: { range: (_u, min, max) => [0, Math.max(1, max, min)] } },
      axes: [{ stroke: '#57606a' }, { stroke: '#57606a', label: unit, size: 56 }],
      series: [
        {},
        ...series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 2,
          spanGaps: false,
          points: { show: s.kind === 'line', size: 5, fill: s.color },
          ...(s.kind === 'steps' ? { paths: uPlot.paths.stepped({ align: 1 }) } : {}),
          ...(s.kind === 'bars' ? { paths: uPlot.paths.bars({ size: [s.width, 48] }), fill: s.color } : {}),
        })),
      ],
    };
    const data = [times.map((t) => Date.parse(t) / 1000), ...series.map((s) => s.values)];
    plot.current = new uPlot(options, data, element);
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
