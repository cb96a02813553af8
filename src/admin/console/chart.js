import { h } from './dom.js';

/** Bar chart of units per UTC day as inline SVG (no library; the CSP allows no other), from
 * the server's [{day, units}] with every day of the range present. */
/** The frame every bar chart of the console shares: a 900x220 view, the axes, the top and
 * zero labels, a note when there is nothing to show, and the bars (`bars(y)` draws them, `y`
 * mapping a value to its height). */
export const CHART = { W: 900, H: 220, left: 40, bottom: 40, top: 10 };
export function barFrame({ max, label, testid, empty }, bars) {
  const { W, H, left, bottom, top } = CHART;
  const y = (v) => top + (H - top - bottom) * (1 - v / max);
  return h('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label, 'data-testid': testid },
    h('line', { class: 'axis', x1: left, y1: H - bottom, x2: W - 5, y2: H - bottom }),
    h('line', { class: 'axis', x1: left, y1: top, x2: left, y2: H - bottom }),
    h('text', { x: left - 4, y: top + 10, 'text-anchor': 'end' }, String(max)),
    h('text', { x: left - 4, y: H - bottom, 'text-anchor': 'end' }, '0'),
    empty ? h('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle' }, empty) : '',
    bars(y),
  );
}

/** View units a "MM-DD" label needs with a gap (five 11 px digits are ~33): the SVG scales as
 * a whole, so what fits in the view fits at any width. A label every day overlapped its
 * neighbours past ~26 days (31 at 1280 px, issue 39). */
const DAY_LABEL_UNITS = 42;

export function dailyChart(rows) {
  const { W, H, left, bottom } = CHART;
  const perDay = new Map(rows.map((r) => [r.day, r.units]));
  const days = rows.map((r) => r.day);
  const max = Math.max(1, ...perDay.values());
  const slot = days.length ? (W - left - 10) / days.length : 0;
  // every k-th day labelled, counted back from the last (today, usually) so that it always is
  const every = slot > 0 ? Math.ceil(DAY_LABEL_UNITS / slot) : 1;
  return barFrame({ max, label: 'units per UTC day', testid: 'usage-chart', empty: rows.every((r) => r.units === 0) && 'no usage in this range' }, (y) =>
    days.map((d, i) => {
      const v = perDay.get(d);
      const x = left + i * slot + slot * 0.1;
      return h('g', { 'data-day': d, 'data-units': v },
        h('rect', { class: 'bar', x, y: y(Math.max(v, 0)), width: Math.max(1, slot * 0.8), height: Math.max(0, H - bottom - y(Math.max(v, 0))) }, h('title', {}, `${d}: ${v} units`)),
        h('text', { x: x + slot * 0.4, y: H - bottom + 14, 'text-anchor': 'middle', class: 'day-label' }, (days.length - 1 - i) % every === 0 ? d.slice(5) : ''),
        h('text', { x: x + slot * 0.4, y: y(Math.max(v, 0)) - 3, 'text-anchor': 'middle' }, v === 0 ? '' : String(v)),
      );
    }));
}
