import { get, qs } from './api.js';
import { fmtTime, guarded, h, pagedTable } from './dom.js';
import { filterForm, filterQuery } from './filters.js';

const HEADERS = ['time (UTC)', 'token', 'module', 'status', 'error', 'outcome', 'replay', 'captures', 'units', 'client', 'country', 'latency ms', 'request'];

function row(a, onToken) {
  return h('tr', { 'data-request-id': a.request_id },
    h('td', {}, fmtTime(a.at)),
    h('td', { title: a.token_id ?? '' }, a.token_id === null ? '—' : h('button', { type: 'button', class: 'link', title: 'only this token', onclick: () => onToken(a.token_id) }, a.token_name ?? a.token_id)),
    h('td', {}, a.module_id ?? ''),
    h('td', { class: 'num' }, String(a.status)),
    h('td', {}, a.error_code ?? ''),
    h('td', { 'data-testid': 'outcome' }, a.outcome ?? 'unknown'),
    h('td', { 'data-testid': 'replayed' }, a.replayed === null ? 'unknown' : a.replayed ? 'replay' : 'no'),
    h('td', { class: 'num' }, String(a.captures)),
    h('td', { class: 'num' }, String(a.charged_units)),
    h('td', {}, a.client_ip),
    h('td', {}, a.country ?? ''),
    h('td', { class: 'num' }, String(a.latency_ms)),
    h('td', {}, h('code', {}, a.request_id)),
  );
}

/** Newest first; every filter is applied by the server. */
export async function renderAudit(panel, filters = {}) {
  const query = await filterQuery(filters);
  const list = pagedTable({
    headers: HEADERS,
    testid: 'audit-table',
    empty: 'No audit records match.',
    load: (cursor) => get(`/admin/api/audit${qs({ ...query, order: 'desc', limit: 50, cursor })}`),
    // a token's name narrows the log to that token
    row: (a) => row(a, (tokenId) => guarded(() => renderAudit(panel, { ...filters, token: tokenId }))),
  });
  panel.replaceChildren(
    h('h2', {}, 'Audit log'),
    h('p', { class: 'muted' }, 'Every verify call, newest first. Times are UTC. Outcome: live, non_live, retry, mixed (a batch with several) or error; a replay is an answer repeated for a reused Idempotency-Key (nothing charged).'),
    filterForm(filters, (f) => guarded(() => renderAudit(panel, f)), { audit: true }),
    list.el,
  );
  await list.reload();
}
