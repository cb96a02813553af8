import { h, localToIso } from './dom.js';

/** token/module/from/to filter form shared by the usage and audit views. */
export function filterForm(values, onApply) {
  const form = h('form', {},
    h('label', {}, 'Token id', h('input', { name: 'token_id', value: values.token_id ?? '' })),
    h('label', {}, 'Module', h('select', { name: 'module_id' }, ['', 'rgb_liveness', 'color_liveness'].map((m) => h('option', { value: m, selected: values.module_id === m }, m || 'all')))),
    h('label', {}, 'From', h('input', { name: 'from', type: 'datetime-local' })),
    h('label', {}, 'To', h('input', { name: 'to', type: 'datetime-local' })),
    h('button', { type: 'submit' }, 'Apply'),
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    onApply({ token_id: f.get('token_id'), module_id: f.get('module_id'), from: localToIso(String(f.get('from'))), to: localToIso(String(f.get('to'))) });
  });
  return form;
}
