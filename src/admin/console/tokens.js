import { del, get, patch, post, put, qs } from './api.js';
import { dailyChart } from './chart.js';
import { confirmed, fmtTime, guarded, h, isoToUtcInput, onSubmit, pagedTable, table, utcInputToIso } from './dom.js';

const MODULES = ['rgb_liveness', 'color_liveness'];
const PERIODS = ['day', 'month', 'never'];

const limitText = (l) => (l === null ? 'unlimited' : String(l));
/** blank means unlimited (null), as in the API */
const limitValue = (text) => (text.trim() === '' ? null : Number(text));

/** A limit box's value, refusing what is not a whole number: a number box answers '' for a
 * typo such as `1e` or `-`, which read as blank made the grant unlimited (review3b); the new
 * token form's own validation refuses it before submitting, this box is in no form. */
function limitOf(input) {
  if (input.validity.badInput || !input.checkValidity()) throw new Error(`The limit must be a whole number of 0 or more, or blank for unlimited. ${input.validationMessage || 'This is not a number.'}`);
  return limitValue(input.value);
}

function periodSelect(name, value = 'day') {
  return h('select', { name }, PERIODS.map((p) => h('option', { value: p, selected: p === value }, p)));
}

function createForm(panel) {
  const grantRows = MODULES.map((m) =>
    h('fieldset', {},
      h('legend', {}, m),
      h('label', { class: 'inline' }, h('input', { type: 'checkbox', name: `grant_${m}`, 'data-testid': `grant-${m}` }), 'granted'),
      h('label', {}, 'Limit (blank: unlimited)', h('input', { name: `limit_${m}`, type: 'number', min: 0, step: 1, 'data-testid': `limit-${m}` })),
      h('label', {}, 'Period', periodSelect(`period_${m}`)),
    ),
  );
  const form = h('form', { id: 'token-create' },
    h('h2', {}, 'New token'),
    h('label', {}, 'Name', h('input', { name: 'name', required: true, maxlength: 200, 'data-testid': 'token-name' })),
    h('label', {}, 'Expires (UTC, optional)', h('input', { name: 'expires', type: 'datetime-local' })),
    h('label', { class: 'inline' }, h('input', { type: 'checkbox', name: 'demo' }), 'demo (archive images)'),
    grantRows,
    h('button', { type: 'submit', 'data-testid': 'token-create-submit' }, 'Create token'),
  );
  onSubmit(form, async () => {
    const f = new FormData(form);
    const grants = MODULES.filter((m) => f.get(`grant_${m}`)).map((m) => ({ module_id: m, limit: limitValue(String(f.get(`limit_${m}`))), period: f.get(`period_${m}`) }));
    const body = { name: String(f.get('name')), demo: f.get('demo') === 'on', grants };
    const expires = utcInputToIso(String(f.get('expires')));
    if (expires) body.expires_at = expires;
    const created = await post('/admin/api/tokens', body);
    form.reset();
    // the new token is listed by its name, whatever page it would fall on
    await renderTokens(panel, created, created.name);
  });
  return form;
}

/** The plaintext exists only in the create answer: shown here once, never fetched again. */
function plaintextNotice(created) {
  const value = h('code', { class: 'secret', id: 'new-token-plaintext', 'data-testid': 'new-token-plaintext' }, created.token);
  const copy = h('button', { type: 'button', 'data-testid': 'copy-token' }, 'Copy');
  copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(created.token);
      copy.textContent = 'Copied';
    } catch {
      // clipboard needs a secure context; selecting the text lets the operator copy by hand
      getSelection().selectAllChildren(value);
      copy.textContent = 'Selected: press Ctrl+C';
    }
  });
  return h('div', { class: 'notice', role: 'status' },
    h('p', {}, `Token "${created.name}" created. Copy it now: it is shown this once and cannot be read again.`),
    h('p', {}, value, ' ', copy),
  );
}

function tokenRow(t, refresh, openDetail) {
  const act = (label, fn, cls) => h('button', { type: 'button', class: cls, onclick: () => guarded(async () => { if ((await fn()) !== false) await refresh(); }) }, label);
  const expiry = h('input', { type: 'datetime-local', value: isoToUtcInput(t.expires_at), 'aria-label': `new expiry of ${t.name} (UTC)` });
  const actions = t.revoked
    ? [h('span', { class: 'muted' }, 'revoked')]
    : [
        act(t.enabled ? 'Disable' : 'Enable', async () => {
          if (t.enabled && !confirmed(`Disable token "${t.name}"? Its calls are refused until it is enabled again.`)) return false;
          await patch(`/admin/api/tokens/${t.id}`, { enabled: !t.enabled });
        }),
        act(t.demo ? 'Unset demo' : 'Set demo', () => patch(`/admin/api/tokens/${t.id}`, { demo: !t.demo })),
        expiry,
        act('Set expiry (UTC; blank: never)', () => patch(`/admin/api/tokens/${t.id}`, { expires_at: utcInputToIso(expiry.value) })),
        act('Revoke', async () => {
          if (!confirmed(`Revoke token "${t.name}" for good? This cannot be undone.`)) return false;
          await del(`/admin/api/tokens/${t.id}`);
        }, 'danger'),
      ];
  return h('tr', { 'data-token-id': t.id },
    h('td', {}, h('button', { type: 'button', class: 'link', title: 'grants and usage', onclick: () => guarded(() => openDetail(t.id)) }, t.name)),
    h('td', {}, h('code', {}, `${t.token_prefix}…`)),
    h('td', {}, t.revoked ? 'revoked' : t.enabled ? 'enabled' : 'disabled'),
    h('td', {}, t.expires_at ? fmtTime(t.expires_at) : 'never'),
    h('td', {}, t.demo ? 'yes' : 'no'),
    h('td', {}, t.grants.map((g) => {
      // usage against limit: the page carries each grant's usage now
      const u = (t.usage ?? []).find((x) => x.module_id === g.module_id);
      return h('div', { 'data-testid': `grant-usage-${g.module_id}` },
        u ? `${g.module_id}: ${u.used} / ${limitText(g.limit)} ${g.period}` : `${g.module_id}: ${limitText(g.limit)} / ${g.period}`,
        u && g.limit ? h('meter', { min: 0, max: g.limit, value: u.used, high: g.limit * 0.8, optimum: 0 }) : '');
    })),
    h('td', {}, h('div', { class: 'row-actions' }, actions)),
  );
}

async function renderDetail(panel, id, back) {
  const [t, daily, active] = await Promise.all([
    get(`/admin/api/tokens/${id}`), get(`/admin/api/usage/daily${qs({ token_id: id })}`), get(`/admin/api/tokens/${id}/sessions`),
  ]);
  const usage = new Map(t.usage.map((u) => [u.module_id, u]));
  const grantRow = (m) => {
    const g = t.grants.find((x) => x.module_id === m);
    const u = usage.get(m);
    const limit = h('input', { type: 'number', min: 0, step: 1, value: g && g.limit !== null ? String(g.limit) : '', placeholder: 'unlimited', 'aria-label': `limit ${m}` });
    const period = periodSelect(`period-${m}`, g?.period ?? 'day');
    return h('tr', { 'data-module': m },
      h('td', {}, m),
      h('td', {}, g ? `${limitText(g.limit)} / ${g.period}` : 'not granted'),
      h('td', { class: 'num', 'data-testid': `used-${m}` }, u ? String(u.used) : ''),
      h('td', { class: 'num' }, u ? limitText(u.remaining) : ''),
      h('td', {}, u?.reset_at ? fmtTime(u.reset_at) : ''),
      h('td', {}, h('div', { class: 'row-actions' },
        limit, period,
        h('button', { type: 'button', onclick: () => guarded(async () => { await put(`/admin/api/tokens/${id}/grants/${m}`, { limit: limitOf(limit), period: period.value }); await renderDetail(panel, id, back); }) }, g ? 'Change grant' : 'Grant'),
        g && h('button', { type: 'button', class: 'danger', onclick: () => guarded(async () => {
          if (!confirmed(`Remove the ${m} grant of "${t.name}"? Its calls to ${m} are refused at once (usage of the period is kept).`)) return;
          await del(`/admin/api/tokens/${id}/grants/${m}`);
          await renderDetail(panel, id, back);
        }) }, 'Remove grant'),
      )),
    );
  };
  panel.replaceChildren(
    h('button', { type: 'button', 'data-testid': 'back-to-tokens', onclick: () => guarded(() => renderTokens(panel, undefined, back)) }, '← All tokens'),
    h('h2', {}, `Token "${t.name}"`),
    h('p', { class: 'muted' }, `${t.id} · ${t.token_prefix}… · created ${fmtTime(t.created_at)} · ${t.revoked ? 'revoked' : t.enabled ? 'enabled' : 'disabled'}`),
    h('p', { class: 'muted' }, 'Used and remaining are for the current period; day and month periods reset at 00:00 UTC.'),
    h('button', { type: 'button', 'data-testid': 'refresh-detail', onclick: () => guarded(() => renderDetail(panel, id, back)) }, 'Refresh'),
    table(['module', 'grant', 'used', 'remaining', 'resets (UTC)', ''], MODULES.map(grantRow)),
    h('h3', {}, `Units per UTC day, ${daily.from} to ${daily.to}: `, h('span', { 'data-testid': 'token-usage-total' }, String(daily.total))),
    h('div', { class: 'chart-wrap' }, dailyChart(daily.days)),
    h('h3', {}, 'Active device sessions: ', h('span', { 'data-testid': 'token-sessions-count' }, String(active.sessions.length))),
    active.sessions.length === 0
      ? h('p', { class: 'muted' }, 'None: devices hold no session of this token now.')
      : h('div', { 'data-testid': 'token-sessions' }, table(['session', 'module', 'captures used', 'created (UTC)', 'expires (UTC)', ''], active.sessions.map((x) => h('tr', { 'data-session': x.session_id },
        h('td', {}, h('code', {}, x.session_id)),
        h('td', {}, x.module_id),
        h('td', { class: 'num' }, `${x.captures_used} / ${x.max_captures}`),
        h('td', {}, fmtTime(x.created_at)),
        h('td', {}, fmtTime(x.expires_at)),
        // one device lost or misbehaving: end its session, not the token every device shares
        h('td', {}, h('button', { type: 'button', class: 'danger', 'data-testid': 'revoke-session', onclick: () => guarded(async () => {
          if (!confirmed(`Revoke device session ${x.session_id}? The device's session token is refused at once; the token "${t.name}" and its other sessions keep working.`)) return;
          await del(`/admin/api/sessions/${encodeURIComponent(x.session_id)}`);
          await renderDetail(panel, id, back);
        }) }, 'Revoke')),
      )))),
  );
}

/** Tokens are searched and paged by the server (name, prefix or id; name order), so the
 * view costs the same with ten tokens or fifty thousand. `search` keeps the query when the
 * operator comes back from a token's detail. */
export async function renderTokens(panel, created, search = '') {
  const list = pagedTable({
    headers: ['name', 'prefix', 'state', 'expires (UTC)', 'demo', 'grants (used / limit period)', ''],
    testid: 'token-table',
    empty: search ? `No token matches "${search}".` : 'No tokens yet.',
    load: (cursor) => get(`/admin/api/tokens${qs({ q: search, limit: 50, cursor })}`).then((p) => ({ items: p.tokens, next_cursor: p.next_cursor })),
    row: (t) => tokenRow(t, () => list.reload(), (id) => renderDetail(panel, id, search)),
  });
  const box = h('input', { type: 'search', name: 'q', value: search, placeholder: 'name, lvk_ prefix or tok_ id', 'aria-label': 'search tokens', 'data-testid': 'token-search' });
  const searchForm = h('form', { class: 'search', role: 'search', 'data-testid': 'token-search-form' },
    h('label', {}, 'Search tokens', box),
    h('button', { type: 'submit' }, 'Search'),
  );
  searchForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void guarded(() => renderTokens(panel, undefined, box.value.trim()));
  });
  panel.replaceChildren(
    created ? plaintextNotice(created) : '',
    createForm(panel),
    h('h2', {}, 'Tokens'),
    searchForm,
    list.el,
  );
  await list.reload();
}
