import { get, patch } from './api.js';
import { confirmed, guarded, h, table } from './dom.js';

export async function renderModules(panel) {
  const { modules } = await get('/admin/api/modules');
  const row = (m) =>
    h('tr', { 'data-module': m.module_id },
      h('td', {}, m.module_id),
      h('td', {}, m.enabled ? 'enabled' : 'disabled'),
      h('td', {}, m.ready ? 'ready' : `not ready${m.error ? `: ${m.error}` : ''}`),
      h('td', {}, m.modes.join(', ')),
      h('td', {}, m.model_set),
      h('td', {}, m.trained === null ? '—' : m.trained ? 'yes' : 'no (random weights)'),
      h('td', {}, m.decision_policy),
      h('td', { class: 'num' }, String(m.threshold)),
      h('td', {}, m.execution_provider ?? '—'),
      h('td', {}, h('button', {
        type: 'button',
        class: m.enabled ? 'danger' : 'primary',
        onclick: () => guarded(async () => {
          if (m.enabled && !confirmed(`Disable ${m.module_id}? Every token's calls to it are refused (403 module_disabled) until it is enabled again.`)) return;
          await patch(`/admin/api/modules/${m.module_id}`, { enabled: !m.enabled });
          await renderModules(panel);
        }),
      }, m.enabled ? 'Disable' : 'Enable')),
    );
  panel.replaceChildren(
    h('h2', {}, 'Modules'),
    h('p', { class: 'muted' }, 'A module is callable when it is enabled here, ready (models loaded) and granted to the token.'),
    table(['module', 'operator switch', 'readiness', 'modes', 'model set', 'trained', 'decision policy', 'threshold', 'execution provider', ''], modules.map(row)),
  );
}
