import { get, post } from './api.js';
import { confirmed, fmtTime, guarded, h, table } from './dom.js';

export async function renderSettlements(panel) {
  const { settlements } = await get('/admin/api/settlements');
  const resolve = (s, action) =>
    guarded(async () => {
      if (!confirmed(`${action === 'charge' ? 'Charge' : 'Refund'} ${s.units} unit(s) of request ${s.request_id}?`)) return;
      // a refusal (409: another operator or the CLI resolved it meanwhile) redraws the list too,
      // so the row it refused no longer offers its buttons (review3b); its error is shown after
      const failed = await post(`/admin/api/settlements/${s.id}/resolve`, { action }).then(() => null, (e) => e);
      await renderSettlements(panel);
      if (failed) throw failed;
    });
  panel.replaceChildren(
    h('h2', {}, 'Pending settlements'),
    h('p', { class: 'muted' }, 'Verify calls whose settlement could not be written. Charge when the client received its answer, refund when it did not.'),
    settlements.length === 0
      ? h('p', {}, 'Nothing pending.')
      : table(['created (UTC)', 'request', 'token', 'module', 'units', 'state', 'idempotency key', ''], settlements.map((s) =>
          h('tr', {},
            h('td', {}, fmtTime(s.created_at)), h('td', {}, h('code', {}, s.request_id)), h('td', {}, s.token_id), h('td', {}, s.module_id),
            h('td', { class: 'num' }, String(s.units)), h('td', {}, s.state), h('td', {}, s.idempotency_key ?? ''),
            h('td', {}, h('div', { class: 'row-actions' },
              h('button', { type: 'button', onclick: () => resolve(s, 'charge') }, 'Charge'),
              h('button', { type: 'button', class: 'danger', onclick: () => resolve(s, 'refund') }, 'Refund'))),
          ))),
  );
}
