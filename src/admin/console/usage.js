import { get, qs } from './api.js';
import { dailyChart } from './chart.js';
import { fmtTime, guarded, h, table } from './dom.js';
import { filterForm } from './filters.js';

// The chart sums every ledger entry in the range (charges minus refunds per UTC day), reading
// up to MAX_PAGES pages; the table below pages through the same entries.
const MAX_PAGES = 20;
const PAGE = 1000;

async function perDay(filters) {
  const days = new Map();
  let cursor = null;
  let pages = 0;
  do {
    const page = await get(`/admin/api/usage${qs({ ...filters, limit: PAGE, cursor })}`);
    for (const e of page.items) {
      const d = e.at.slice(0, 10);
      days.set(d, (days.get(d) ?? 0) + (e.kind === 'refund' ? -e.units : e.units));
    }
    cursor = page.next_cursor;
  } while (cursor && ++pages < MAX_PAGES);
  return { days: fillGaps(days), truncated: Boolean(cursor) };
}

/** Days without entries become zero bars, so the axis is calendar time (up to a year). */
function fillGaps(days) {
  const keys = [...days.keys()].sort();
  if (keys.length < 2) return days;
  const end = Date.parse(keys[keys.length - 1]);
  let t = Date.parse(keys[0]);
  if ((end - t) / 86_400_000 > 366) return days;
  const out = new Map();
  for (; t <= end; t += 86_400_000) {
    const d = new Date(t).toISOString().slice(0, 10);
    out.set(d, days.get(d) ?? 0);
  }
  return out;
}

export async function renderUsage(panel, filters = {}) {
  const { days, truncated } = await perDay(filters);
  const total = [...days.values()].reduce((a, b) => a + b, 0);
  const list = h('div', {});
  const showPage = async (cursor) => {
    const page = await get(`/admin/api/usage${qs({ ...filters, limit: 50, cursor })}`);
    list.replaceChildren(
      table(['time', 'kind', 'units', 'token', 'module', 'request'], page.items.map((e) =>
        h('tr', {}, h('td', {}, fmtTime(e.at)), h('td', {}, e.kind), h('td', { class: 'num' }, String(e.units)), h('td', {}, e.token_id), h('td', {}, e.module_id), h('td', {}, h('code', {}, e.request_id))))),
      page.next_cursor ? h('button', { type: 'button', onclick: () => guarded(() => showPage(page.next_cursor)) }, 'Next page') : h('p', { class: 'muted' }, 'End of the ledger.'),
    );
  };
  panel.replaceChildren(
    h('h2', {}, 'Usage'),
    filterForm(filters, (f) => guarded(() => renderUsage(panel, f))),
    h('p', {}, 'Units used in range (charges minus refunds): ', h('strong', { 'data-testid': 'usage-total' }, String(total)), truncated ? ' (first pages only)' : ''),
    dailyChart(days),
    h('h2', {}, 'Ledger entries'),
    list,
  );
  await showPage(null);
}
