import { get, patch, post } from './api.js';
import { confirmed, fmtTime, guarded, h, table } from './dom.js';

// Modules and models (issue 25): each module's switch and readiness with its reason, then every
// model set in MODELS_DIR: trained or not, its graphs and modes, its last calibration (the DET
// plot the CLI drew), and activation behind a confirmation.

const pctText = (r) => (typeof r === 'number' ? `${(r * 100).toFixed(2)} %` : '—');

function calibration(set) {
  const c = set.calibration;
  if (!c) return h('p', { class: 'muted' }, `Not calibrated here: npm run cli -- models calibrate ${set.model_set} --live <dir> --attack <dir>`);
  const at = c.manifest_threshold ?? {};
  return h('div', { 'data-testid': `calibration-${set.model_set}` },
    h('p', {}, `Calibrated ${fmtTime(c.at)} on ${c.counts.bona_fide} bona fide and ${c.counts.attack} attack crops. `,
      `At the manifest threshold: APCER ${pctText(at.apcer)}, BPCER ${pctText(at.bpcer)}, ACER ${pctText(at.acer)}`,
      c.eer && typeof c.eer.eer === 'number' ? `; EER ${pctText(c.eer.eer)} near threshold ${c.eer.threshold.toFixed(4)}.` : '.'),
    c.det_plot ? h('img', { class: 'det', src: `/admin/api/model-sets/${encodeURIComponent(set.model_set)}/det.svg`, alt: `DET curve of ${set.model_set}` }) : '',
  );
}

/** Polls the node's model-set state until it answers this request (bounded). */
async function waitForActivation(requestId) {
  for (let i = 0; i < 600; i++) {
    const st = await get('/admin/api/model-set');
    if (st.last_request_id === requestId) return st;
    await new Promise((r) => setTimeout(r, 500));
  }
  return null;
}

function setCard(set, active, activating, panel, note) {
  const isActive = set.model_set === active;
  const activate = h('button', {
    type: 'button',
    class: 'primary',
    'data-testid': `activate-${set.model_set}`,
    disabled: isActive || activating !== null || set.error !== null,
    onclick: () => guarded(async () => {
      const warn = set.trained === false ? ' Its manifest says it is UNTRAINED: its verdicts would mean nothing.' : '';
      if (!confirmed(`Activate model set ${set.model_set} on this node? It loads and warms beside ${active}, then every new call uses it.${warn}`)) return;
      const req = await post('/admin/api/model-set', { model_set: set.model_set });
      note.textContent = `Activating ${set.model_set}...`;
      const st = await waitForActivation(req.request_id);
      document.dispatchEvent(new Event('lv:models-changed'));
      await renderModules(panel, st?.last ? `${st.last.model_set}: ${st.last.outcome}${st.last.reason ? ` (${st.last.reason})` : ''}` : 'no answer yet; see below');
    }),
  }, isActive ? 'Active' : 'Activate');
  return h('section', { class: 'set', 'data-set': set.model_set },
    h('h3', {}, set.model_set, isActive ? ' (active)' : '', ' ',
      h('span', { class: set.trained ? 'badge ok' : 'badge warn', 'data-testid': `trained-${set.model_set}` }, set.trained === null ? 'manifest error' : set.trained ? 'trained' : 'untrained')),
    set.description ? h('p', { class: 'muted' }, set.description) : '',
    set.error ? h('p', { class: 'error' }, set.error) : '',
    Object.entries(set.modules).map(([id, m]) =>
      h('div', {},
        h('strong', {}, id),
        table(['graph', 'role', 'output', 'input'], m.graphs.map((g) => h('tr', {}, h('td', {}, g.file), h('td', {}, g.role), h('td', {}, g.output_kind), h('td', {}, g.size ? `${g.size}x${g.size} ${g.layout}` : '—')))),
        h('p', { class: 'muted' }, Object.entries(m.modes).map(([mode, p]) => `${mode}: ${p.decision_policy}, threshold ${p.threshold}`).join('; ')),
      )),
    calibration(set),
    h('div', { class: 'row-actions' }, activate),
  );
}

export async function renderModules(panel, message = '') {
  const [{ modules }, sets] = await Promise.all([get('/admin/api/modules'), get('/admin/api/model-sets')]);
  const row = (m) =>
    h('tr', { 'data-module': m.module_id },
      h('td', {}, m.module_id),
      h('td', {}, m.enabled ? 'enabled' : 'disabled'),
      h('td', {}, m.ready ? 'ready' : `not ready${m.error ? `: ${m.error}` : ''}`),
      h('td', {}, m.modes.join(', ')),
      h('td', {}, m.model_set),
      // a set that lacks the module has no model, so neither trained nor a threshold for it
      h('td', { 'data-testid': 'module-trained' }, m.trained === null ? '—' : m.trained ? 'yes' : 'no (random weights)'),
      h('td', {}, m.decision_policy || '—'),
      h('td', { class: 'num', 'data-testid': 'module-threshold' }, m.decision_policy ? String(m.threshold) : '—'),
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
  const note = h('p', { class: 'notice', 'data-testid': 'activation-note', hidden: !message }, message);
  panel.replaceChildren(
    h('h2', {}, 'Modules'),
    h('p', { class: 'muted' }, 'A module is callable when it is enabled here, ready (models loaded) and granted to the token.'),
    table(['module', 'operator switch', 'readiness', 'modes', 'model set', 'trained', 'decision policy', 'threshold', 'execution provider', ''], modules.map(row)),
    h('h2', {}, 'Model sets'),
    h('p', { class: 'muted' }, `Serving ${sets.active}${sets.activating ? `; activating ${sets.activating}` : ''}. Activation is per node and outlives a restart while MODEL_SET is unchanged. Import a trained graph with npm run cli -- models import (README "Deploying a trained model").`),
    note,
    ...sets.sets.map((set) => setCard(set, sets.active, sets.activating, panel, note)),
  );
}
