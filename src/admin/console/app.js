import { ApiError, get, post, setCsrf, whenSessionChanged, whenUnauthorised } from './api.js';
import { renderAudit } from './audit.js';
import { guarded, showError } from './dom.js';
import { renderModules } from './modules.js';
import { renderOverview } from './overview.js';
import { renderSettlements } from './settlements.js';
import { renderTokens } from './tokens.js';
import { renderUsage } from './usage.js';
import { renderUsers } from './users.js';

const TABS = { overview: (view) => renderOverview(view, 'hour', (name) => void openTab(name)), tokens: renderTokens, modules: renderModules, users: renderUsers, usage: renderUsage, audit: renderAudit, settlements: renderSettlements };
const $ = (id) => document.getElementById(id);

function showLogin(message = '') {
  setCsrf(null);
  $('main-view').hidden = true;
  $('whoami').hidden = true;
  $('login-view').hidden = false;
  $('login-error').textContent = message;
}

function showMain(session) {
  setCsrf(session.csrf_token);
  $('login-view').hidden = true;
  $('main-view').hidden = false;
  $('whoami').hidden = false;
  $('whoami-name').textContent = `${session.username} (${session.role})`;
  void openTab(location.hash.slice(1) in TABS ? location.hash.slice(1) : 'overview');
}

// A 403 that says the session changed under this page (api.js): read it again. A new CSRF token
// (another tab logged in again) is taken, and the refused change is sent once more; another
// account, or one no longer an administrator, is shown as it now is.
whenSessionChanged(async () => {
  const session = await get('/auth/session');
  setCsrf(session.csrf_token);
  $('whoami-name').textContent = `${session.username} (${session.role})`;
  if (session.role !== 'admin') showLogin(`${session.username} is no longer an administrator: log in as one.`);
  return session;
});

// the models can change while the console is open (an activation here or by the CLI): the
// banner is read again with every tab opened and after an activation (review3b: it was read at
// login only, and kept saying the models were trained after an untrained set was activated)
document.addEventListener('lv:models-changed', () => void showUntrainedBanner());

// Random weights answer live and not live by chance: an operator must see it on every page.
async function showUntrainedBanner() {
  const banner = $('untrained-banner');
  try {
    const { modules } = await get('/admin/api/modules');
    const untrained = modules.filter((m) => m.trained === false);
    banner.hidden = untrained.length === 0;
    banner.textContent = untrained.length === 0 ? '' :
      `Untrained models: ${untrained.map((m) => `${m.module_id} (${m.model_set})`).join(', ')} serve random weights, so their verdicts mean nothing. ` +
      'Deploy trained graphs (README "Deploying a trained model") and set REQUIRE_TRAINED_MODELS=1 in production.';
  } catch {
    banner.hidden = true; // the modules tab shows the error itself
  }
}

async function openTab(name) {
  for (const b of document.querySelectorAll('#tabs button')) b.setAttribute('aria-selected', String(b.dataset.tab === name));
  history.replaceState(null, '', `#${name}`);
  // Each opening renders into its own box: a slower, earlier tab that answers late fills a
  // box no longer on the page instead of replacing the tab the operator switched to.
  const view = document.createElement('div');
  view.dataset.tab = name;
  $('panel').replaceChildren(view);
  void showUntrainedBanner();
  await guarded(() => TABS[name](view));
}

whenUnauthorised(() => showLogin('Your session has ended; log in again.'));

$('login-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const form = new FormData(ev.target);
  try {
    const session = await post('/auth/login', { username: form.get('username'), password: form.get('password') });
    $('login-password').value = '';
    showMain(session);
  } catch (e) {
    $('login-error').textContent = e instanceof ApiError && e.status === 401 ? 'Wrong username or password.' : e.message;
  }
});

$('logout').addEventListener('click', () =>
  guarded(async () => {
    await post('/auth/logout');
    showLogin();
  }),
);

for (const b of document.querySelectorAll('#tabs button')) b.addEventListener('click', () => openTab(b.dataset.tab));

try {
  showMain(await get('/auth/session'));
} catch {
  showError('');
  showLogin();
}
