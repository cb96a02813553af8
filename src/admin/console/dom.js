// Elements are built with textContent and attributes only, never innerHTML: token names,
// usernames and audit fields are operator or client input.

/** h('td', {class: 'num'}, 'text', childNode, ...) */
export function h(tag, attrs = {}, ...children) {
  const svg = ['svg', 'rect', 'line', 'text', 'g', 'title'].includes(tag);
  const el = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'onclick' && tag === 'button') el.addEventListener('click', oneAtATime(el, v));
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value' && !svg) el.value = v;
    else if (k === 'checked' && !svg) el.checked = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** A button's action runs once at a time: while the promise it returns is pending, the button is
 * disabled and further clicks send nothing (a double click created a token and then showed the
 * second request's 409, resolved a settlement and then showed "not waiting", and sent two
 * activations, review3b). */
function oneAtATime(button, action) {
  return (ev) => {
    if (button.dataset.busy) return;
    const out = action(ev);
    if (!out || typeof out.then !== 'function') return;
    const wasDisabled = button.disabled;
    button.dataset.busy = '1';
    button.disabled = true;
    void out.finally(() => {
      delete button.dataset.busy;
      button.disabled = wasDisabled;
    });
  };
}

/** A form whose submission changes something: the same, for its submit buttons. */
export function onSubmit(form, action) {
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (form.dataset.busy) return;
    const buttons = [...form.querySelectorAll('button[type=submit]')].filter((b) => !b.disabled);
    form.dataset.busy = '1';
    for (const b of buttons) b.disabled = true;
    void guarded(action).finally(() => {
      delete form.dataset.busy;
      for (const b of buttons) b.disabled = false;
    });
  });
}

/** Each cell gets its column's name as data-label: on a narrow screen the stylesheet shows
 * rows as cards, labelling each value with it (a 12-column table cannot fit 420 px). */
export function table(headers, rows) {
  const body = h('tbody', {}, rows);
  for (const tr of body.rows) {
    [...tr.cells].forEach((td, i) => {
      if (headers[i] && !td.hasAttribute('data-label')) td.setAttribute('data-label', headers[i]);
    });
  }
  return h('table', {}, h('thead', {}, h('tr', {}, headers.map((x) => h('th', {}, x)))), body);
}

/** A table over a cursor-paged API: `load(cursor)` answers {items, next_cursor}. Earlier
 * cursors are kept, so "Previous" needs no server support. `reload()` redraws the current
 * page (after an action on one of its rows). */
export function pagedTable({ headers, load, row, empty = 'Nothing found.', testid }) {
  const el = h('div', { class: 'paged', 'data-testid': testid });
  const cursors = [null];
  let at = 0;
  const show = async () => {
    const page = await load(cursors[at]);
    cursors.length = at + 1;
    if (page.next_cursor) cursors.push(page.next_cursor);
    const prev = h('button', { type: 'button', disabled: at === 0, 'data-testid': 'page-prev', onclick: () => guarded(() => { at--; return show(); }) }, '← Previous');
    const next = h('button', { type: 'button', disabled: !page.next_cursor, 'data-testid': 'page-next', onclick: () => guarded(() => { at++; return show(); }) }, 'Next →');
    el.replaceChildren(
      // a selective filter may answer an empty page that is not the end: the server walks a
      // bounded stretch per call, and Next searches on from where it stopped
      page.items.length === 0
        ? h('p', { class: 'muted', 'data-testid': 'empty' }, page.next_cursor ? 'No matches in this stretch; Next searches further.' : empty)
        : table(headers, page.items.map(row)),
      h('div', { class: 'pager' }, prev, h('span', { class: 'muted', 'data-testid': 'page-number' }, `page ${at + 1}`), next),
    );
    el.setAttribute('data-page', String(at + 1));
  };
  return { el, reload: show };
}

/** A destructive action runs only after the operator says yes to this exact question. */
export function confirmed(question) {
  return window.confirm(question);
}

export function showError(message) {
  document.getElementById('main-error').textContent = message ?? '';
}

/** Runs an action and shows its failure instead of throwing it away. */
export async function guarded(fn) {
  showError('');
  try {
    await fn();
  } catch (e) {
    showError(e.message);
  }
}

/** Every time the console shows is UTC and says so (the service stores and compares UTC). */
export function fmtTime(iso) {
  return iso ? `${iso.replace('T', ' ').replace(/(\.\d+)?Z$/, '')} UTC` : '';
}

/** A datetime-local or date input's value read as UTC (its label says so), never as the
 * browser's zone -> ISO 8601, or null when empty. */
export function utcInputToIso(value) {
  if (!value) return null;
  const t = Date.parse(/T/.test(value) ? `${value}Z` : `${value}T00:00:00Z`);
  return Number.isNaN(t) ? null : new Date(t).toISOString();
}

/** An ISO time as a datetime-local value in UTC (to prefill an input). */
export function isoToUtcInput(iso) {
  return iso ? iso.slice(0, 16) : '';
}
