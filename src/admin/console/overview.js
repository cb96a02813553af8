import { get } from './api.js';
import { barFrame, CHART } from './chart.js';
import { fmtTime, guarded, h, table } from './dom.js';

// The first page: what a person would rather look at than read. Verify calls per minute over
// the last hour (or per hour over the day) as stacked bars by answer class, the verdicts they
// gave, capacity, models, settlements waiting, and the grants nearing their limits.

const CLASSES = [
  ['ok', 'answered (2xx)'],
  ['client_error', 'refused (4xx)'],
  ['server_error', 'failed (5xx)'],
];

function callsChart(buckets, label, tick) {
  const { W, H, left, bottom } = CHART;
  const max = Math.max(1, ...buckets.map((b) => b.calls));
  const slot = (W - left - 10) / buckets.length;
  return barFrame({ max, label, testid: 'calls-chart', empty: buckets.every((b) => b.calls === 0) && 'no verify calls in this period' }, (y) =>
    buckets.map((b, i) => {
      const x = left + i * slot + slot * 0.1;
      let base = 0;
      const parts = CLASSES.map(([key]) => {
        const v = b[key];
        const rect = h('rect', { class: `bar ${key}`, x, y: y(base + v), width: Math.max(1, slot * 0.8), height: Math.max(0, y(base) - y(base + v)) });
        base += v;
        return rect;
      });
      return h('g', { 'data-start': b.start, 'data-calls': b.calls },
        h('title', {}, `${fmtTime(b.start)}: ${b.calls} calls (${b.ok} answered, ${b.client_error} refused, ${b.server_error} failed; live ${b.live}, not live ${b.non_live}, retry ${b.retry})`),
        parts,
        h('text', { x: x + slot * 0.4, y: H - bottom + 14, 'text-anchor': 'middle' }, tick(b, i)),
      );
    }));
}

function sum(buckets) {
  const s = { calls: 0, ok: 0, client_error: 0, server_error: 0, live: 0, non_live: 0, retry: 0, mixed: 0 };
  for (const b of buckets) for (const k of Object.keys(s)) s[k] += b[k];
  return s;
}

const pct = (part, whole) => (whole === 0 ? '0 %' : `${Math.round((100 * part) / whole)} %`);

function tile(testid, title, value, note, warn = false) {
  return h('div', { class: `tile${warn ? ' warn' : ''}`, 'data-testid': testid },
    h('div', { class: 'tile-title' }, title),
    h('div', { class: 'tile-value' }, value),
    note ? h('div', { class: 'tile-note' }, note) : '',
  );
}

export async function renderOverview(panel, period = 'hour', openTab = () => {}) {
  const o = await get('/admin/api/overview');
  const buckets = period === 'hour' ? o.last_hour : o.last_day;
  const totals = sum(buckets);
  const ready = o.modules.filter((m) => m.enabled && m.ready).length;
  const enabled = o.modules.filter((m) => m.enabled).length;
  const untrained = o.modules.filter((m) => m.trained === false);
  const switchTo = (p) => () => guarded(() => renderOverview(panel, p, openTab));
  panel.replaceChildren(
    h('h2', {}, 'Overview'),
    h('div', { class: 'tiles' },
      tile('tile-calls', period === 'hour' ? 'Verify calls, last hour' : 'Verify calls, last day', String(totals.calls),
        `${pct(totals.client_error, totals.calls)} refused, ${pct(totals.server_error, totals.calls)} failed`, totals.server_error > 0),
      tile('tile-verdicts', 'Verdicts', `${totals.live} live`, `${totals.non_live} not live, ${totals.retry} retry${totals.mixed ? `, ${totals.mixed} mixed` : ''}`),
      tile('tile-slots', 'Verify slots in use', `${o.slots.in_use} / ${o.slots.total}`, 'uploads and inference now, whole host', o.slots.in_use >= o.slots.total * 0.8),
      tile('tile-models', 'Models ready', `${ready} / ${enabled}`,
        untrained.length ? `untrained: ${untrained.map((m) => m.module_id).join(', ')}` : 'all trained', ready < enabled || untrained.length > 0),
      tile('tile-settlements', 'Settlements waiting', String(o.pending_settlements),
        o.pending_settlements ? h('button', { type: 'button', class: 'link', onclick: () => openTab('settlements') }, 'resolve them') : 'none', o.pending_settlements > 0),
    ),
    h('div', { class: 'row-actions' },
      h('button', { type: 'button', 'aria-pressed': String(period === 'hour'), 'data-testid': 'period-hour', onclick: switchTo('hour') }, 'Last hour, per minute'),
      h('button', { type: 'button', 'aria-pressed': String(period === 'day'), 'data-testid': 'period-day', onclick: switchTo('day') }, 'Last day, per hour'),
    ),
    h('div', { class: 'chart-wrap' },
      callsChart(buckets, period === 'hour' ? 'verify calls per minute, last hour' : 'verify calls per hour, last day',
        (b, i) => (period === 'hour' ? (i % 10 === 0 ? b.start.slice(11, 16) : '') : (i % 3 === 0 ? b.start.slice(11, 13) + 'h' : ''))),
    ),
    h('p', { class: 'legend' }, CLASSES.map(([key, text]) => h('span', { class: `key ${key}` }, text))),
    o.complete_from ? h('p', { class: 'notice' }, `The audit log holds more calls than the overview reads: bars before ${fmtTime(o.complete_from)} are incomplete.`) : '',
    h('h2', {}, 'Grants at 80 % of their limit or more'),
    o.near_limit.length === 0
      ? h('p', { class: 'muted', 'data-testid': 'near-limit-none' }, 'None.')
      : table(['token', 'module', 'used', 'period', 'resets'], o.near_limit.map((n) =>
        h('tr', { 'data-testid': 'near-limit' },
          h('td', {}, n.token_name),
          h('td', {}, n.module_id),
          h('td', { class: 'num' }, h('meter', { min: 0, max: n.limit, value: n.used, high: n.limit * 0.9, optimum: 0 }), ` ${n.used} / ${n.limit}`),
          h('td', {}, n.period),
          h('td', {}, n.reset_at ? fmtTime(n.reset_at) : 'never'),
        ))),
    o.near_limit_truncated ? h('p', { class: 'muted' }, 'Only the first 2000 tokens were read.') : '',
    h('p', { class: 'muted' }, `As of ${fmtTime(o.at)}. Calls are verify calls from the audit log; replays count as calls, not as verdicts.`),
  );
}
