import { get, qs } from './api.js';
import { h, isoToUtcInput, utcInputToIso } from './dom.js';

const OUTCOMES = ['live', 'non_live', 'retry', 'mixed', 'error'];

/** An outcome as a person reads it: the API's non_live is "not live", as the verdict is called
 * everywhere else (the client package's not_live, the overview); the value sent stays the API's. */
export function outcomeText(o) {
  return o === 'non_live' ? 'not live' : o ?? 'unknown';
}

/** "tok_..." is an id; anything else is a token name (unique, case ignored), looked up on
 * the server by `name`, one request however many names contain it, so operators filter by the
 * names they know. */
export async function resolveToken(text) {
  const value = text.trim();
  if (!value || value.startsWith('tok_')) return value || undefined;
  // an older store may hold duplicates of a name (written before names were unique): the one
  // spelled as typed, if there is one, else the first
  const { tokens } = await get(`/admin/api/tokens${qs({ name: value, limit: 100 })}`);
  const match = tokens.find((t) => t.name === value) ?? tokens[0];
  if (match) return match.id;
  throw new Error(`No token is named "${value}".`);
}

/** Filter form of the usage and audit views. Times are entered and read as UTC. `audit` adds
 * the status and outcome filters. `values` holds the applied filters (token shown as typed). */
export function filterForm(values, onApply, { audit = false, dates = false } = {}) {
  const kind = dates ? 'date' : 'datetime-local';
  const shown = (iso) => (dates ? (iso ?? '').slice(0, 10) : isoToUtcInput(iso));
  const form = h('form', { class: 'filters', 'data-testid': 'filters' },
    h('label', {}, 'Token (name or id)', h('input', { name: 'token', value: values.token ?? '', 'data-testid': 'filter-token' })),
    h('label', {}, 'Module', h('select', { name: 'module_id', 'data-testid': 'filter-module' }, ['', 'rgb_liveness', 'color_liveness'].map((m) => h('option', { value: m, selected: values.module_id === m }, m || 'all')))),
    audit && h('label', {}, 'Status (e.g. 429 or 4xx)', h('input', { name: 'status', value: values.status ?? '', size: 5, 'data-testid': 'filter-status' })),
    audit && h('label', {}, 'Outcome', h('select', { name: 'outcome', 'data-testid': 'filter-outcome' }, ['', ...OUTCOMES].map((o) => h('option', { value: o, selected: values.outcome === o }, o ? outcomeText(o) : 'all')))),
    h('label', {}, `From (UTC${dates ? ' day' : ''})`, h('input', { name: 'from', type: kind, value: shown(values.from), 'data-testid': 'filter-from' })),
    h('label', {}, `To (UTC${dates ? ' day, inclusive' : ', exclusive'})`, h('input', { name: 'to', type: kind, value: shown(dates && values.to ? new Date(Date.parse(values.to) - 86_400_000).toISOString() : values.to), 'data-testid': 'filter-to' })),
    h('button', { type: 'submit', 'data-testid': 'filter-apply' }, 'Apply'),
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    let to = utcInputToIso(String(f.get('to')));
    // a day range includes its last day: the API's `to` is exclusive
    if (dates && to) to = new Date(Date.parse(to) + 86_400_000).toISOString();
    const applied = { token: String(f.get('token')), module_id: f.get('module_id'), from: utcInputToIso(String(f.get('from'))), to };
    if (audit) Object.assign(applied, { status: String(f.get('status')).trim(), outcome: f.get('outcome') });
    onApply(applied);
  });
  return form;
}

/** The API query of applied filters (token name resolved to its id). */
export async function filterQuery(values) {
  const { token, ...rest } = values;
  return { ...rest, token_id: token ? await resolveToken(token) : undefined };
}
