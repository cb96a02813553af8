import { get, patch, post, qs } from './api.js';
import { confirmed, fmtTime, guarded, h, onSubmit, pagedTable } from './dom.js';

// Destructive changes ask first: disabling an account ends its sessions, taking the admin
// role locks it out of this console.
const QUESTIONS = {
  disable: (u) => `Disable user "${u.username}"? Their sessions end at once.`,
  demote: (u) => `Make "${u.username}" a user? They lose access to this console.`,
};

export async function renderUsers(panel, search = '') {
  const form = h('form', {},
    h('h2', {}, 'New user'),
    h('label', {}, 'Username', h('input', { name: 'username', required: true, pattern: '[A-Za-z0-9_.@\\-]{1,64}' })),
    h('label', {}, 'Password (8+ characters)', h('input', { name: 'password', type: 'password', minlength: 8, required: true, autocomplete: 'new-password' })),
    h('label', {}, 'Role', h('select', { name: 'role' }, h('option', { value: 'admin' }, 'admin'), h('option', { value: 'user' }, 'user (cannot log in)'))),
    // the server makes an admin only with the acting operator's own password (a session alone
    // is not enough: issue 40), so the form asks for it
    h('label', {}, 'Your current password (to create an admin)', h('input', { name: 'current_password', type: 'password', autocomplete: 'current-password', 'data-testid': 'create-current-password' })),
    h('button', { type: 'submit' }, 'Create user'),
  );
  onSubmit(form, async () => {
    const f = new FormData(form);
    const body = { username: f.get('username'), password: f.get('password'), role: f.get('role') };
    if (body.role === 'admin') body.current_password = f.get('current_password');
    await post('/admin/api/users', body);
    await renderUsers(panel, String(f.get('username')));
  });
  const change = (u, body, question) => guarded(async () => {
    if (question && !confirmed(question)) return;
    await patch(`/admin/api/users/${u.id}`, body);
    await list.reload();
  });
  const row = (u) => {
    const pw = h('input', { type: 'password', minlength: 8, placeholder: 'new password', autocomplete: 'new-password', 'aria-label': `new password for ${u.username}` });
    // the server sets a password, and gives or takes admin access (make admin, make user,
    // disable or enable an admin), only with the acting operator's own password (a session
    // alone is not enough), so the row asks for it
    const current = h('input', { type: 'password', placeholder: 'your current password', autocomplete: 'current-password', 'aria-label': `your current password, to change ${u.username}`, 'data-testid': 'current-password' });
    // a role-`user` account cannot log in: enabling or disabling it changes no admin access
    const withPassword = (body) => (u.role === 'admin' || body.role === 'admin' ? { ...body, current_password: current.value } : body);
    return h('tr', { 'data-user': u.username },
      h('td', {}, u.username),
      h('td', {}, u.role),
      h('td', {}, u.enabled ? 'enabled' : 'disabled'),
      h('td', {}, fmtTime(u.created_at)),
      h('td', {}, h('div', { class: 'row-actions' },
        h('button', { type: 'button', onclick: () => change(u, withPassword({ enabled: !u.enabled }), u.enabled && QUESTIONS.disable(u)) }, u.enabled ? 'Disable' : 'Enable'),
        h('button', { type: 'button', onclick: () => change(u, withPassword({ role: u.role === 'admin' ? 'user' : 'admin' }), u.role === 'admin' && QUESTIONS.demote(u)) }, u.role === 'admin' ? 'Make user' : 'Make admin'),
        pw,
        current,
        h('button', { type: 'button', onclick: () => change(u, { password: pw.value, current_password: current.value }, `Set a new password for "${u.username}"? Their other sessions end.`) }, 'Set password'),
      )),
    );
  };
  const list = pagedTable({
    headers: ['username', 'role', 'state', 'created (UTC)', ''],
    testid: 'user-table',
    empty: search ? `No user matches "${search}".` : 'No users.',
    load: (cursor) => get(`/admin/api/users${qs({ q: search, limit: 50, cursor })}`).then((p) => ({ items: p.users, next_cursor: p.next_cursor })),
    row,
  });
  const box = h('input', { type: 'search', name: 'q', value: search, placeholder: 'username or usr_ id', 'aria-label': 'search users', 'data-testid': 'user-search' });
  const searchForm = h('form', { class: 'search', role: 'search' }, h('label', {}, 'Search users', box), h('button', { type: 'submit' }, 'Search'));
  searchForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void guarded(() => renderUsers(panel, box.value.trim()));
  });
  panel.replaceChildren(form, h('h2', {}, 'Users'), searchForm, list.el);
  await list.reload();
}
