// Elements are built with textContent and attributes only, never innerHTML: token names,
// usernames and audit fields are operator or client input.

/** h('td', {class: 'num'}, 'text', childNode, ...) */
export function h(tag, attrs = {}, ...children) {
  const svg = ['svg', 'rect', 'line', 'text', 'g', 'title'].includes(tag);
  const el = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
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

export function table(headers, rows) {
  return h('table', {}, h('thead', {}, h('tr', {}, headers.map((x) => h('th', {}, x)))), h('tbody', {}, rows));
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

export function fmtTime(iso) {
  return iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '';
}

/** datetime-local value (browser's zone) -> ISO 8601 UTC, or null when empty. */
export function localToIso(value) {
  return value ? new Date(value).toISOString() : null;
}
