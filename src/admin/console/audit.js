import { del, get, qs } from './api.js';
import { confirmed, fmtTime, guarded, h, pagedTable } from './dom.js';
import { filterForm, filterQuery, outcomeText } from './filters.js';

// Twelve columns fit a 1280 px window (issue 39): the request id, the only way into a call's
// detail, comes second so it is never the one cut off; the error code shares the status cell
// and the country the client's; long values are clipped, in full in their title and the detail.
const HEADERS = ['time (UTC)', 'request', 'token', 'session', 'module', 'status', 'outcome', 'replay', 'captures', 'units', 'client', 'ms'];
// calls: empty on a call's own row, the count on a row of refusals counted per minute
const CSV_COLUMNS = ['at', 'request_id', 'token_id', 'token_name', 'session_id', 'module_id', 'status', 'error_code', 'outcome', 'replayed', 'captures', 'charged_units', 'client_ip', 'country', 'latency_ms', 'calls', 'last_at'];
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
    // the API's values as they are (outcome non_live, session_id empty for a business token's call)
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
  const fields = h('div', {}, h('p', {},
    a.calls ? `${a.calls} calls refused before a capacity slot from ${a.at} to ${a.last_at}, counted in one row; the first was request ${a.request_id}; status ${a.status}${a.error_code ? ` ${a.error_code}` : ''}; ` : `request ${a.request_id}; ${a.captures} capture(s), ${a.charged_units} unit(s) charged; status ${a.status}${a.error_code ? ` ${a.error_code}` : ''}; `,
    `client ${a.client_ip}${a.country ? ` (${a.country})` : ''}; ${a.latency_ms} ms`),
  a.session_id ? sessionLine(a) : h('p', { 'data-testid': 'detail-session' }, `Made with the business token ${a.token_name ?? a.token_id ?? ''} itself, not a device session.`));
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

/** The detail's line on the device session a call was made with, and the way to end it. */
function sessionLine(a) {
  const note = h('span', { class: 'muted', 'data-testid': 'session-revoked' });
  const revoke = h('button', {
    type: 'button',
    class: 'danger',
    'data-testid': 'detail-revoke-session',
    onclick: () => guarded(async () => {
      if (!confirmed(`Revoke device session ${a.session_id}? The device's session token is refused at once; the token "${a.token_name ?? a.token_id}" and its other sessions keep working.`)) return;
      await del(`/admin/api/sessions/${encodeURIComponent(a.session_id)}`);
      revoke.disabled = true;
      note.textContent = ' Revoked.';
    }),
  }, 'Revoke this session');
  return h('p', { 'data-testid': 'detail-session' }, `Made with device session ${a.session_id}, charged to the token ${a.token_name ?? a.token_id}. `, revoke, note);
}

function row(a, onToken) {
  const opener = h('button', { type: 'button', class: 'link', title: `${a.request_id}: details`, 'data-testid': 'audit-detail' }, `${a.request_id.slice(0, 8)}…`);
  const tr = h('tr', { 'data-request-id': a.request_id },
    h('td', { title: a.at }, fmtTime(a.at)),
    // the id in full is in the detail: here its start, which is enough to tell rows apart
    h('td', { 'data-testid': 'audit-request' }, opener),
    h('td', { class: 'clip', title: a.token_id ?? '' }, a.token_id === null ? '—' : h('button', { type: 'button', class: 'link', title: 'only this token', onclick: () => onToken(a.token_id) }, a.token_name ?? a.token_id)),
    // a device session's call is charged to its business token: the session says which device
    h('td', { class: 'clip', title: a.session_id ?? 'the business token itself', 'data-testid': 'audit-session' }, a.session_id ?? '—'),
    h('td', {}, a.module_id ?? ''),
    // a row counting refused calls (one minute, one caller) says how many it stands for
    h('td', { class: 'clip', title: a.calls ? `${a.calls} calls refused before a capacity slot, ${a.at} to ${a.last_at}` : a.error_code ?? '', 'data-testid': 'audit-status' }, String(a.status), a.error_code ? ` ${a.error_code}` : '', a.calls ? ` ×${a.calls}` : ''),
    h('td', { 'data-testid': 'outcome', title: a.outcome ?? '' }, outcomeText(a.outcome)),
    h('td', { 'data-testid': 'replayed' }, a.replayed === null ? 'unknown' : a.replayed ? 'replay' : 'no'),
    h('td', { class: 'num' }, String(a.captures)),
    h('td', { class: 'num' }, String(a.charged_units)),
    h('td', { class: 'clip', title: a.client_ip }, a.client_ip, a.country ? ` ${a.country}` : ''),
    h('td', { class: 'num' }, String(a.latency_ms)),
  );
  opener.addEventListener('click', () => guarded(() => detail(a, tr)));
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
    h('p', { class: 'muted' }, 'Every verify call, newest first. Times are UTC. Outcome: live, not live, retry, mixed (a batch with several) or error; a replay is an answer repeated for a reused Idempotency-Key (nothing charged). Session: the device session a call was made with (— for the business token itself). Calls refused before a capacity slot (401, 403, 404, 503) are counted per minute and caller in one row (×N in the status). A request id opens the call\'s detail and its scores; a session\'s call can end its session there. The CSV has the API\'s values (outcome non_live).'),
    filterForm(filters, (f) => guarded(() => renderAudit(panel, f)), { audit: true }),
    h('div', { class: 'row-actions' }, h('button', { type: 'button', 'data-testid': 'audit-csv', onclick: () => guarded(() => exportCsv(query, status)) }, 'Export CSV (these filters)'), status),
    h('div', { class: 'audit-wrap' }, list.el),
  );
  await list.reload();
}
