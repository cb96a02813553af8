import { del, get, patch, post, put } from './api.js';
import { fmtTime, guarded, h, localToIso, table } from './dom.js';

const MODULES = ['rgb_liveness', 'color_liveness'];
const PERIODS = ['day', 'month', 'never'];

const limitText = (l) => (l === null ? 'unlimited' : String(l));
/** blank means unlimited (null), as in the API */
const limitValue = (text) => (text.trim() === '' ? null : Number(text));

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
    h('label', {}, 'Expires (optional)', h('input', { name: 'expires', type: 'datetime-local' })),
    h('label', { class: 'inline' }, h('input', { type: 'checkbox', name: 'demo' }), 'demo (archive images)'),
    grantRows,
    h('button', { type: 'submit', 'data-testid': 'token-create-submit' }, 'Create token'),
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void guarded(async () => {
      const f = new FormData(form);
      const grants = MODULES.filter((m) => f.get(`grant_${m}`)).map((m) => ({ module_id: m, limit: limitValue(String(f.get(`limit_${m}`))), period: f.get(`period_${m}`) }));
      const body = { name: String(f.get('name')), demo: f.get('demo') === 'on', grants };
      const expires = localToIso(String(f.get('expires')));
      if (expires) body.expires_at = expires;
      const created = await post('/admin/api/tokens', body);
      form.reset();
      await renderTokens(panel, created);
    });
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

function tokenRow(panel, t) {
  const act = (label, fn, cls) => h('button', { type: 'button', class: cls, onclick: () => guarded(async () => { await fn(); await renderTokens(panel); }) }, label);
  const expiry = h('input', { type: 'datetime-local', 'aria-label': 'new expiry' });
  const actions = t.revoked
    ? [h('span', { class: 'muted' }, 'revoked')]
    : [
        act(t.enabled ? 'Disable' : 'Enable', () => patch(`/admin/api/tokens/${t.id}`, { enabled: !t.enabled })),
        act(t.demo ? 'Unset demo' : 'Set demo', () => patch(`/admin/api/tokens/${t.id}`, { demo: !t.demo })),
        expiry,
        act('Set expiry (blank: never)', () => patch(`/admin/api/tokens/${t.id}`, { expires_at: localToIso(expiry.value) })),
        act('Revoke', async () => {
          if (confirm(`Revoke "${t.name}" for good?`)) await del(`/admin/api/tokens/${t.id}`);
        }, 'danger'),
      ];
  return h('tr', { 'data-token-id': t.id },
    h('td', {}, h('button', { type: 'button', class: 'link', title: 'grants and usage', onclick: () => guarded(() => renderDetail(panel, t.id)) }, t.name)),
    h('td', {}, h('code', {}, `${t.token_prefix}…`)),
    h('td', {}, t.revoked ? 'revoked' : t.enabled ? 'enabled' : 'disabled'),
    h('td', {}, t.expires_at ? fmtTime(t.expires_at) : 'never'),
    h('td', {}, t.demo ? 'yes' : 'no'),
    h('td', {}, t.grants.map((g) => h('div', {}, `${g.module_id}: ${limitText(g.limit)} / ${g.period}`))),
    h('td', {}, h('div', { class: 'row-actions' }, actions)),
  );
}

async function renderDetail(panel, id) {
  const t = await get(`/admin/api/tokens/${id}`);
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
        h('button', { type: 'button', onclick: () => guarded(async () => { await put(`/admin/api/tokens/${id}/grants/${m}`, { limit: limitValue(limit.value), period: period.value }); await renderDetail(panel, id); }) }, g ? 'Change grant' : 'Grant'),
        g && h('button', { type: 'button', class: 'danger', onclick: () => guarded(async () => { await del(`/admin/api/tokens/${id}/grants/${m}`); await renderDetail(panel, id); }) }, 'Remove grant'),
      )),
    );
  };
  panel.replaceChildren(
    h('button', { type: 'button', onclick: () => guarded(() => renderTokens(panel)) }, '← All tokens'),
    h('h2', {}, `Token "${t.name}"`),
    h('p', { class: 'muted' }, `${t.id} · ${t.token_prefix}… · created ${fmtTime(t.created_at)} · ${t.revoked ? 'revoked' : t.enabled ? 'enabled' : 'disabled'}`),
    h('button', { type: 'button', 'data-testid': 'refresh-detail', onclick: () => guarded(() => renderDetail(panel, id)) }, 'Refresh'),
    table(['module', 'grant', 'used', 'remaining', 'resets', ''], MODULES.map(grantRow)),
  );
}

export async function renderTokens(panel, created) {
  const { tokens } = await get('/admin/api/tokens');
  panel.replaceChildren(
    created ? plaintextNotice(created) : '',
    createForm(panel),
    h('h2', {}, 'Tokens'),
    table(['name', 'prefix', 'state', 'expires', 'demo', 'grants (limit / period)', ''], tokens.map((t) => tokenRow(panel, t))),
  );
}
