import { get, qs } from './api.js';
import { dailyChart } from './chart.js';
import { fmtTime, guarded, h, pagedTable } from './dom.js';
import { filterForm, filterQuery } from './filters.js';
import { csvField, download } from './audit.js';

// The chart is drawn from the server's daily totals (GET /admin/api/usage/daily: every UTC
// day of the range, charges minus refunds on the day that took the units); the table below
// pages through the ledger entries, newest first.
export async function renderUsage(panel, filters = {}) {
  const query = await filterQuery(filters);
  const { token_id, module_id, from, to } = query;
  const daily = await get(`/admin/api/usage/daily${qs({ token_id, module_id, from, to })}`);
  const list = pagedTable({
    headers: ['time (UTC)', 'kind', 'units', 'token', 'module', 'request'],
    testid: 'ledger-table',
    empty: 'No ledger entries in this range.',
    load: (cursor) => get(`/admin/api/usage${qs({ token_id, module_id, from: from ?? `${daily.from}T00:00:00Z`, to, order: 'desc', limit: 50, cursor })}`),
    row: (e) => h('tr', {},
      h('td', {}, fmtTime(e.at)), h('td', {}, e.kind), h('td', { class: 'num' }, String(e.units)),
      h('td', { title: e.token_id }, e.token_name ?? e.token_id), h('td', {}, e.module_id), h('td', {}, h('code', {}, e.request_id))),
  });
  panel.replaceChildren(
    h('h2', {}, 'Usage'),
    filterForm(filters, (f) => guarded(() => renderUsage(panel, f)), { dates: true }),
    h('p', {}, `Units used from ${daily.from} to ${daily.to} (UTC days; charges minus refunds): `, h('strong', { 'data-testid': 'usage-total' }, String(daily.total))),
    h('div', { class: 'chart-wrap' }, dailyChart(daily.days)),
    h('div', { class: 'row-actions' }, h('button', {
      type: 'button',
      'data-testid': 'usage-csv',
      // the range's daily totals, as the chart shows them (this token and module, or all)
      onclick: () => download(`usage-${daily.from}-${daily.to}.csv`,
        `${['day,units', ...daily.days.map((d) => `${csvField(d.day)},${csvField(d.units)}`)].join('\r\n')}\r\n`),
    }, 'Export CSV (daily units, this range)')),
    h('h2', {}, 'Ledger entries'),
    list.el,
  );
  await list.reload();
}
