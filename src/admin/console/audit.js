import { get, qs } from './api.js';
import { fmtTime, guarded, h, pagedTable } from './dom.js';
import { filterForm, filterQuery } from './filters.js';

const HEADERS = ['time (UTC)', 'token', 'module', 'status', 'error', 'outcome', 'replay', 'captures', 'units', 'client', 'country', 'latency ms', 'request'];
const CSV_COLUMNS = ['at', 'request_id', 'token_id', 'token_name', 'module_id', 'status', 'error_code', 'outcome', 'replayed', 'captures', 'charged_units', 'client_ip', 'country', 'latency_ms'];
/** Rows one export reads at most (50 pages): a wider range is exported in parts. */
const CSV_MAX_ROWS = 50_000;

/** RFC 4180 field; a leading = + - @ is quoted with a ' so that a spreadsheet does not run it
 * as a formula (token names and error codes are client or operator text). */
export function csvField(v) {
  let s = v === null || v === undefined ? '' : String(v);
  if (/^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

export function download(name, text) {
  const url = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
  const a = h('a', { href: url, download: name, 'data-testid': 'csv-link' });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

async function exportCsv(query, status) {
  const lines = [CSV_COLUMNS.join(',')];
  let cursor;
  let rows = 0;
  do {
    const page = await get(`/admin/api/audit${qs({ ...query, order: 'desc', limit: 1000, cursor })}`);
    for (const a of page.items) lines.push(CSV_COLUMNS.map((c) => csvField(c === 'outcome' ? a.outcome ?? 'unknown' : a[c])).join(','));
    rows += page.items.length;
    cursor = page.next_cursor;
    status.textContent = `${rows} rows read...`;
  } while (cursor && rows < CSV_MAX_ROWS);
  status.textContent = cursor ? `${rows} rows exported; the range holds more: narrow it and export the rest.` : `${rows} rows exported.`;
  download(`audit-${new Date().toISOString().slice(0, 19).replaceAll(':', '')}.csv`, `${lines.join('\r\n')}\r\n`);
}

/** The row's detail, opened under it: every field, and the results the call answered. */
async function detail(a, tr) {
  const next = tr.nextElementSibling;
  if (next?.classList.contains('detail')) {
    next.remove();
    return;
  }
  const cell = h('td', { colspan: HEADERS.length });
  tr.after(h('tr', { class: 'detail', 'data-detail-for': a.request_id }, cell));
  const fields = h('p', {},
    `request ${a.request_id}; ${a.captures} capture(s), ${a.charged_units} unit(s) charged; status ${a.status}${a.error_code ? ` ${a.error_code}` : ''}; `,
    `client ${a.client_ip}${a.country ? ` (${a.country})` : ''}; ${a.latency_ms} ms`);
  cell.replaceChildren(fields, h('p', { class: 'muted' }, 'Loading results...'));
  let results = null;
  try {
    results = (await get(`/admin/api/results/${encodeURIComponent(a.request_id)}`)).results;
  } catch {
    results = null;
  }
  cell.replaceChildren(fields, results === null
    ? h('p', { class: 'muted' }, 'No results kept (not charged, or older than RETENTION_RESULTS_DAYS).')
    : h('table', { 'data-testid': 'results' },
      h('thead', {}, h('tr', {}, ['capture', 'mode', 'status', 'alive', 'score', 'reason'].map((x) => h('th', {}, x)))),
      h('tbody', {}, results.map((r) => h('tr', {},
        h('td', {}, r.capture_id), h('td', {}, r.mode), h('td', {}, r.status),
        h('td', {}, r.alive === null ? '—' : r.alive ? 'live' : 'not live'),
        h('td', { class: 'num', 'data-testid': 'score' }, typeof r.score === 'number' ? r.score.toFixed(4) : '—'),
        h('td', {}, r.reason ?? ''))))));
}

function row(a, onToken) {
  const tr = h('tr', { 'data-request-id': a.request_id },
    h('td', { title: a.at }, fmtTime(a.at)),
    h('td', { title: a.token_id ?? '' }, a.token_id === null ? '—' : h('button', { type: 'button', class: 'link', title: 'only this token', onclick: () => onToken(a.token_id) }, a.token_name ?? a.token_id)),
    h('td', {}, a.module_id ?? ''),
    h('td', { class: 'num' }, String(a.status)),
    h('td', {}, a.error_code ?? ''),
    h('td', { 'data-testid': 'outcome' }, a.outcome ?? 'unknown'),
    h('td', { 'data-testid': 'replayed' }, a.replayed === null ? 'unknown' : a.replayed ? 'replay' : 'no'),
    h('td', { class: 'num' }, String(a.captures)),
    h('td', { class: 'num' }, String(a.charged_units)),
    h('td', { class: 'clip', title: a.client_ip }, a.client_ip),
    h('td', {}, a.country ?? ''),
    h('td', { class: 'num' }, String(a.latency_ms)),
    // the id in full is in the detail: here its start, which is enough to tell rows apart
    h('td', {}, h('button', { type: 'button', class: 'link', title: `${a.request_id}: details`, 'data-testid': 'audit-detail' }, `${a.request_id.slice(0, 8)}…`)),
  );
  tr.lastElementChild.firstElementChild.addEventListener('click', () => guarded(() => detail(a, tr)));
  return tr;
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
  const status = h('span', { class: 'muted', 'data-testid': 'csv-status' });
  panel.replaceChildren(
    h('h2', {}, 'Audit log'),
    h('p', { class: 'muted' }, 'Every verify call, newest first. Times are UTC. Outcome: live, non_live, retry, mixed (a batch with several) or error; a replay is an answer repeated for a reused Idempotency-Key (nothing charged). A request id opens the call\'s detail and its scores.'),
    filterForm(filters, (f) => guarded(() => renderAudit(panel, f)), { audit: true }),
    h('div', { class: 'row-actions' }, h('button', { type: 'button', 'data-testid': 'audit-csv', onclick: () => guarded(() => exportCsv(query, status)) }, 'Export CSV (these filters)'), status),
    h('div', { class: 'audit-wrap' }, list.el),
  );
  await list.reload();
}
