import { get, qs } from './api.js';
import { fmtTime, guarded, h, table } from './dom.js';
import { filterForm } from './filters.js';

export async function renderAudit(panel, filters = {}) {
  const list = h('div', {});
  const showPage = async (cursor) => {
    const page = await get(`/admin/api/audit${qs({ ...filters, limit: 50, cursor })}`);
    list.replaceChildren(
      table(['time', 'status', 'error', 'token', 'module', 'captures', 'units', 'client', 'country', 'latency ms', 'request'], page.items.map((a) =>
        h('tr', {},
          h('td', {}, fmtTime(a.at)), h('td', { class: 'num' }, String(a.status)), h('td', {}, a.error_code ?? ''), h('td', {}, a.token_id ?? ''), h('td', {}, a.module_id ?? ''),
          h('td', { class: 'num' }, String(a.captures)), h('td', { class: 'num' }, String(a.charged_units)), h('td', {}, a.client_ip), h('td', {}, a.country ?? ''),
          h('td', { class: 'num' }, String(a.latency_ms)), h('td', {}, h('code', {}, a.request_id))))),
      page.next_cursor ? h('button', { type: 'button', onclick: () => guarded(() => showPage(page.next_cursor)) }, 'Next page') : h('p', { class: 'muted' }, 'End of the audit log.'),
    );
  };
  panel.replaceChildren(h('h2', {}, 'Audit log'), filterForm(filters, (f) => guarded(() => renderAudit(panel, f))), list);
  await showPage(null);
}
