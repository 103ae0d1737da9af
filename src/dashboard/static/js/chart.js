// A uPlot time chart in the console's colours. uPlot owns its canvas: data is swapped in place,
// the chart is rebuilt only when its series change.
import { html, useEffect, useRef } from './lib.js';
import uPlot from '/dashboard/vendor/uplot.js';

const AXIS = { stroke: '#8b9ab5', grid: { stroke: '#1c2742' }, ticks: { stroke: '#23304d' } };

/**
 * `series`: [{ label, stroke, width? }] for the y columns; `data`: [xs (unix seconds), ...ys].
 * `windowSec`: show a sliding window of that many seconds; `yFromZero`: the y axis starts at 0
 * (rates), else uPlot fits it to the data (prices).
 */
export function TimeChart({ series, data, height = 300, xLabel = 'time', yValue, testid, windowSec, yFromZero = false }) {
  const box = useRef(null);
  const plot = useRef(null);
  const shape = series.map((s) => s.label).join('|');
  useEffect(() => {
    const el = box.current;
    const opts = {
      width: Math.max(300, el.clientWidth), height,
      // Room on the right for half of the last time label (centred on the axis' end), else clipped.
      padding: [null, 32, null, null],
      // At most windowSec ending at the latest point, at least 30 s (a lone first point is not
      // stretched over years), and no empty past before the first point.
      scales: {
        // No point yet: uPlot passes null, which drew a window ending at 1970-01-01 00:00; end it now.
        x: { time: true, ...(windowSec ? { range: (u, min, max) => {
          const hi = max ?? Date.now() / 1000;
          return [Math.min(hi - 30, Math.max(min ?? hi, hi - windowSec)), hi];
        } } : {}) },
        ...(yFromZero ? { y: { range: (u, min, max) => [0, max > 0 ? max * 1.15 : 1] } } : {}),
      },
      // Labels as the times are (UTC or broker server time), never the browser's zone or locale.
      axes: [
        { ...AXIS, space: 70, values: (u, vs) => vs.map((v) => new Date(v * 1000).toISOString().slice(11, windowSec && windowSec <= 600 ? 19 : 16)) },
        { ...AXIS, size: 70, ...(yValue ? { values: (u, vs) => vs.map(yValue) } : {}) },
      ],
      series: [
        { label: xLabel, value: (u, v) => (v == null ? '—' : new Date(v * 1000).toISOString().slice(11, 19)) },
        ...series.map((s) => ({ label: s.label, stroke: s.stroke, width: s.width ?? 1.5, ...(yValue ? { value: (u, v) => (v == null ? '—' : yValue(v)) } : {}) })),
      ],
    };
    plot.current = new uPlot(opts, data, el);
    const onResize = () => plot.current?.setSize({ width: Math.max(300, el.clientWidth), height });
    addEventListener('resize', onResize);
    return () => { removeEventListener('resize', onResize); plot.current?.destroy(); plot.current = null; };
  }, [shape, height]);
  useEffect(() => { plot.current?.setData(data); }, [data]);
  return html`<div ref=${box} class="chart" data-testid=${testid} data-points=${data[0].length}></div>`;
}
