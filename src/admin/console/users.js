import { get, patch, post } from './api.js';
import { fmtTime, guarded, h, table } from './dom.js';

export async function renderUsers(panel) {
  const { users } = await get('/admin/api/users');
  const form = h('form', {},
    h('h2', {}, 'New user'),
    h('label', {}, 'Username', h('input', { name: 'username', required: true, pattern: '[A-Za-z0-9_.@\\-]{1,64}' })),
    h('label', {}, 'Password (8+ characters)', h('input', { name: 'password', type: 'password', minlength: 8, required: true, autocomplete: 'new-password' })),
    h('label', {}, 'Role', h('select', { name: 'role' }, h('option', { value: 'admin' }, 'admin'), h('option', { value: 'user' }, 'user (cannot log in)'))),
    h('button', { type: 'submit' }, 'Create user'),
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void guarded(async () => {
      const f = new FormData(form);
      await post('/admin/api/users', { username: f.get('username'), password: f.get('password'), role: f.get('role') });
      await renderUsers(panel);
    });
  });
  const change = (u, body) => guarded(async () => { await patch(`/admin/api/users/${u.id}`, body); await renderUsers(panel); });
  const row = (u) => {
    const pw = h('input', { type: 'password', minlength: 8, placeholder: 'new password', autocomplete: 'new-password', 'aria-label': `new password for ${u.username}` });
    return h('tr', {},
      h('td', {}, u.username),
      h('td', {}, u.role),
      h('td', {}, u.enabled ? 'enabled' : 'disabled'),
      h('td', {}, fmtTime(u.created_at)),
      h('td', {}, h('div', { class: 'row-actions' },
        h('button', { type: 'button', onclick: () => change(u, { enabled: !u.enabled }) }, u.enabled ? 'Disable' : 'Enable'),
        h('button', { type: 'button', onclick: () => change(u, { role: u.role === 'admin' ? 'user' : 'admin' }) }, u.role === 'admin' ? 'Make user' : 'Make admin'),
        pw,
        h('button', { type: 'button', onclick: () => change(u, { password: pw.value }) }, 'Set password'),
      )),
    );
  };
  panel.replaceChildren(form, h('h2', {}, 'Users'), table(['username', 'role', 'state', 'created', ''], users.map(row)));
}
