// How many full-server starts and operator-CLI processes the test suite contains (issue 43:
// target at most 35 server starts and 40 CLI processes). Each one costs a TypeScript or
// bundle start-up (about 1 to 4.5 s of CPU), which is what makes the suite long on a 2-core host.
//
//   node scripts/count-test-processes.mjs            static count from test/ sources, per file
//   node scripts/count-test-processes.mjs --json     the same as JSON
//   node scripts/count-test-processes.mjs --run test/a.test.ts [...]
//        runs those files with tap and counts the processes they really started: the harness
//        (bench/harness/server.ts spawnChild) appends one line per service or CLI process to
//        the file named by LV_COUNT_PROCESSES
//
// The static count reads call sites and the loops around them: a site inside a loop (for,
// .map, .forEach, Array.from) counts once per iteration when the source says how many (an
// array literal or a `const NAME = [...]`, `Array.from({ length: N })`, `i < N`, N a number or
// an arithmetic of the file's numeric consts), and a start in a helper counts at each call of
// the helper (startNodes(t, 3, ...) counts 3); a loop in a helper bounded by a field of its
// options (`cycle < opts.cycles`) counts what the call's object literal says (`cycles: 2`),
// and a default start (`(opts.startFinal ?? startServer)(...)`) counts at a call that does not
// give that option (runKillLoop's final start: its test gives an in-process one). A loop whose count the source does not say (a
// while, a loop over a computed list) counts once and is reported, and so does one that may
// break early. Conditions are not read (a start in an `if` counts), so the figure is
// close to a run's, not equal to it: --run gives that one for the files it is handed.
//
// What counts:
//   server starts   startServer(), startNodes(t, n) (n servers), and spawns of the service
//                   itself (SERVICE_ARGS, `npm start` / `npm run <script>`)
//   service exits   runServiceToExit(): the service started with a configuration it must
//                   refuse, which exits during start-up (counted apart: no listening server)
//   CLI processes   runCliProcess(), spawns of the CLI (CLI_ARGS, cli/main.js|ts, cli/bin.ts), and
//                   the `npm run cli` lines of a README block a test runs through sh
//   in-process CLI  runCli() and <server>.cli(): the CLI's runCommand called in the test
//                   process (bench/harness/server.ts), no process, no start-up; counted apart
//                   (before issue 43 each was a process: 172 by call site)
// In-process stand-ins (makeToken/createTokenIn, ledgerVerify, withServerStore) start nothing.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const rel = (f) => path.relative(ROOT, f);

function* walk(dir) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== 'node_modules') yield* walk(p);
    } else if (/\.(ts|mts|mjs|js)$/.test(e.name)) yield p;
  }
}

/** Two views of a source, of its length, position for position: `code` with comments and the
 * bodies of regular-expression literals blanked (strings kept: they name what is spawned), and
 * `mask`, which blanks string contents too (template expressions kept), for bracket matching. */
function lex(src) {
  const code = src.split('');
  const mask = src.split('');
  const blank = (arr, from, to) => {
    for (let k = from; k < to; k++) if (arr[k] !== '\n') arr[k] = ' ';
  };
  let i = 0;
  let lastSignificant = '';
  const regexCanStart = () => lastSignificant === '' || /[(,=:[!&|?{};+\-*%<>~^]$/.test(lastSignificant) || /\b(return|typeof|case|of|in|void|await|yield)$/.test(lastSignificant);
  /** a string or template starting at i; returns the index past it */
  const str = (q, from) => {
    let j = from + 1;
    while (j < src.length && src[j] !== q) {
      if (src[j] === '\\') j += 2;
      else if (q === '`' && src[j] === '$' && src[j + 1] === '{') {
        blank(mask, from + 1, j);
        const end = codeUntil(j + 2, '}');
        from = end - 1;
        j = end;
      } else j++;
    }
    blank(mask, from + 1, j);
    return j + 1;
  };
  /** lexes code from `from` until an unmatched `close` (or the end); returns the index past it */
  function codeUntil(from, close) {
    let depth = 0;
    i = from;
    while (i < src.length) {
      const c = src[i];
      const n = src[i + 1];
      if (c === '/' && n === '/') {
        const e = src.indexOf('\n', i);
        const end = e < 0 ? src.length : e;
        blank(code, i, end);
        blank(mask, i, end);
        i = end;
      } else if (c === '/' && n === '*') {
        const e = src.indexOf('*/', i + 2);
        const end = e < 0 ? src.length : e + 2;
        blank(code, i, end);
        blank(mask, i, end);
        i = end;
      } else if (c === "'" || c === '"' || c === '`') {
        i = str(c, i);
        lastSignificant = 'x';
      } else if (c === '/' && regexCanStart()) {
        let j = i + 1;
        let inClass = false;
        while (j < src.length && src[j] !== '\n' && (inClass || src[j] !== '/')) {
          if (src[j] === '\\') j++;
          else if (src[j] === '[') inClass = true;
          else if (src[j] === ']') inClass = false;
          j++;
        }
        blank(code, i + 1, j);
        blank(mask, i + 1, j);
        i = j + 1;
        lastSignificant = 'x';
      } else {
        if (c === '{' || c === '(' || c === '[') depth++;
        else if (c === '}' || c === ')' || c === ']') {
          if (depth === 0 && c === close) return i + 1;
          depth--;
        }
        if (!/\s/.test(c)) lastSignificant = /[\w$]/.test(c) ? src.slice(Math.max(0, i - 9), i + 1) : c;
        i++;
      }
    }
    return src.length;
  }
  codeUntil(0, null);
  return { code: code.join(''), mask: mask.join('') };
}

/** Index just past the bracket closing the one opened at `open`, in a `mask` (lex()). */
function closeOf(mask, open) {
  const pairs = { '(': ')', '[': ']', '{': '}' };
  const stack = [pairs[mask[open]]];
  for (let i = open + 1; i < mask.length; i++) {
    const c = mask[i];
    if (pairs[c]) stack.push(pairs[c]);
    else if (c === stack[stack.length - 1]) {
      stack.pop();
      if (stack.length === 0) return i + 1;
    }
  }
  return mask.length;
}

const lineOf = (text, at) => text.slice(0, at).split('\n').length;

/** Spans of loop bodies, each with how many times it runs when the source says (`times`, null
 * when it does not): for/while statements, and the arguments of Array.from, .map, .flatMap,
 * .forEach. Known: `for (const x of [a, b])` and `.forEach`/`.map` on an array literal or on a
 * `const NAME = [...]` of the file (its elements), `Array.from({ length: N })` and
 * `for (let i = 0; i < N; i++)` with N a number or an arithmetic of the file's numeric consts. A
 * `break` in the loop's body makes the count an upper bound (`upTo`). */
function loopSpans(S) {
  const mask = S.mask;
  const spans = [];
  for (const m of mask.matchAll(/\b(for|while)\s*\(/g)) {
    const headStart = m.index + m[0].length - 1;
    const headEnd = closeOf(mask, headStart);
    let k = headEnd;
    while (/\s/.test(mask[k] ?? '')) k++;
    const end = mask[k] === '{' ? closeOf(mask, k) : mask.indexOf(';', k) + 1 || mask.length;
    const head = mask.slice(headStart + 1, headEnd - 1);
    let times = null;
    let bound = null;
    if (m[1] === 'for') {
      const of = /^\s*(?:const|let|var)\s+[^]*?\s+of\s+([^]*)$/.exec(head);
      const counted = /^\s*let\s+([A-Za-z_$][\w$]*)\s*=\s*0\s*;\s*\1\s*(<=?)\s*([^;]+);/.exec(head);
      if (of) times = elementsOf(S, of[1].trim(), headStart + 1 + head.indexOf(of[1].trim()));
      else if (counted) {
        const inclusive = counted[2] === '<=' ? 1 : 0;
        const n = numericValue(S, counted[3]);
        if (n !== null) times = n + inclusive;
        // `i < opts.cycles` in a helper: the helper's call says how many (loopFactor, with params)
        else bound = { expr: S.code.slice(headStart + 1 + head.indexOf(counted[3]), headStart + 1 + head.indexOf(counted[3]) + counted[3].length).trim(), inclusive };
      }
    }
    spans.push({ from: m.index, to: end, times, bound, upTo: /\bbreak\b/.test(mask.slice(k, end)) });
  }
  for (const m of mask.matchAll(/(\bArray\.from|\.map|\.flatMap|\.forEach)\s*\(/g)) {
    const paren = m.index + m[0].length - 1;
    let times = null;
    if (m[1] === 'Array.from') {
      const len = /^\(\s*\{\s*length:\s*([^}]+)\}/.exec(mask.slice(paren, paren + 200));
      if (len) times = numericValue(S, len[1]);
    } else {
      // the receiver: an array literal ending right before the dot, or a name
      let e = m.index;
      while (/\s/.test(mask[e - 1] ?? '')) e--;
      if (mask[e - 1] === ']') {
        const open = openOf(mask, e - 1);
        if (open >= 0) times = elementsOf(S, mask.slice(open, e), open);
      } else {
        const name = /([A-Za-z_$][\w$]*)$/.exec(mask.slice(Math.max(0, e - 100), e))?.[1];
        if (name) times = elementsOf(S, name, -1);
      }
    }
    const to = closeOf(mask, paren);
    spans.push({ from: m.index, to, times, upTo: false });
  }
  return spans;
}

/** The `[` that the `]` at `close` closes (-1 if none). */
function openOf(mask, close) {
  const pairs = { ')': '(', ']': '[', '}': '{' };
  const stack = [];
  for (let i = close; i >= 0; i--) {
    const c = mask[i];
    if (pairs[c]) stack.push(pairs[c]);
    else if (c === stack[stack.length - 1]) {
      stack.pop();
      if (stack.length === 0) return i;
    }
  }
  return -1;
}

/** How many elements an array expression has: a literal (`[a, b] as const`) or the name of a
 * `const NAME = [...]` of the file; null when not known. */
function elementsOf(S, expr, at) {
  const mask = S.mask;
  let open = -1;
  if (/^\[/.test(expr) && at >= 0) open = at;
  else {
    const name = /^([A-Za-z_$][\w$]*)$/.exec(expr)?.[1];
    if (!name) return null;
    const decl = new RegExp(`\\bconst\\s+${name.replace(/\$/g, '\\$')}\\s*(?::[^=]+)?=\\s*\\[`).exec(mask);
    if (!decl) return null;
    open = decl.index + decl[0].length - 1;
  }
  const close = closeOf(mask, open);
  const inner = mask.slice(open + 1, close - 1);
  if (inner.trim() === '') return 0;
  let depth = 0;
  let n = 1;
  let lastComma = -1;
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i];
    if ('([{'.includes(c)) depth++;
    else if (')]}'.includes(c)) depth--;
    else if (c === ',' && depth === 0) {
      n++;
      lastComma = i;
    }
  }
  if (lastComma >= 0 && inner.slice(lastComma + 1).trim() === '') n--; // a trailing comma
  return n;
}

/** The value of a numeric expression of literals and the file's numeric consts; null if not one. */
function numericValue(S, expr) {
  let text = expr.trim();
  for (let pass = 0; pass < 4 && /[A-Za-z_$]/.test(text); pass++) {
    text = text.replace(/[A-Za-z_$][\w$]*/g, (name) => {
      const v = new RegExp(`\\bconst\\s+${name.replace(/\$/g, '\\$')}\\s*(?::\\s*number\\s*)?=\\s*([\\d_]+)\\s*;`).exec(S.code)?.[1];
      return v === undefined ? name : v.replace(/_/g, '');
    });
  }
  if (!/^[\d\s+*()-]+$/.test(text)) return null;
  try {
    const v = Function(`"use strict"; return (${text});`)();
    return Number.isInteger(v) && v >= 0 ? v : null;
  } catch {
    return null;
  }
}

/** How many times the code at `at` runs per run of the file, by the loops around it (from
 * `within` on): `times` (the product of the known counts), `unknown` (a loop whose count the
 * source does not say), `upTo` (a loop that may break early); either of those counts once. */
function loopFactor(spans, at, within = 0, params = []) {
  let times = 1;
  let unknown = false;
  let upTo = false;
  // loops bounded by a field of an options parameter of the helper (`i < opts.cycles`): each
  // call of the helper multiplies by what its argument says (callTimes)
  const byParam = [];
  for (const l of spans) {
    if (!(at > l.from && at < l.to && l.from >= within)) continue;
    const field = l.times === null && l.bound ? /^([A-Za-z_$][\w$]*)\.([A-Za-z_$][\w$]*)$/.exec(l.bound.expr) : null;
    // a loop that may break early counts once, like one whose count is unknown; its count is
    // reported as the most it could start
    if (field && params.includes(field[1]) && !l.upTo) byParam.push({ arg: params.indexOf(field[1]), field: field[2], inclusive: l.bound.inclusive });
    else if (l.times === null) unknown = true;
    else if (l.upTo) upTo = true;
    else times *= l.times;
  }
  return { times, unknown, upTo, byParam };
}

/** How many times the loops bounded by an options field (loopFactor's byParam) run at a call
 * with these arguments: the field written as a number in an object-literal argument; null
 * when the call does not say. */
function callTimes(S, byParam, args) {
  let times = 1;
  for (const b of byParam) {
    const arg = args[b.arg] ?? '';
    if (b.unlessGiven) {
      if (!/^\{/.test(arg)) return null;
      times *= new RegExp(`(?:^|[{,\\s])${b.field}\\s*:`).test(arg) ? 0 : 1;
      continue;
    }
    const v = /^\{/.test(arg) ? new RegExp(`(?:^|[{,\\s])${b.field}\\s*:\\s*([^,}\\n]+)`).exec(arg)?.[1] : undefined;
    const n = v === undefined ? null : numericValue(S, v);
    if (n === null) return null;
    times *= n + b.inclusive;
  }
  return times;
}

function paramNames(params) {
  const names = [];
  let depth = 0;
  let cur = '';
  for (let i = 0; i < params.length; i++) {
    const c = params[i];
    if ('([{<'.includes(c)) depth++;
    else if (')]}'.includes(c) || (c === '>' && params[i - 1] !== '=')) depth--;
    if (c === ',' && depth === 0) {
      names.push(cur);
      cur = '';
    } else cur += c;
  }
  if (cur.trim()) names.push(cur);
  return names.map((p) => /^\s*([A-Za-z_$][\w$]*)/.exec(p)?.[1] ?? null);
}

/** Bodies of named functions: `function f(`, `const f = (...) =>`, `const f = async function (`. */
function functionBodies(mask) {
  const out = [];
  const heads = [
    ...[...mask.matchAll(/\bfunction\s*\*?\s*([A-Za-z_$][\w$]*)\s*\(/g)].map((m) => ({ name: m[1], paren: m.index + m[0].length - 1, at: m.index, decl: true })),
    ...[...mask.matchAll(/\b(?:const|let)\s+([A-Za-z_$][\w$]*)\s*=\s*(async\s*)?(function\s*)?\(/g)].map((m) => ({ name: m[1], paren: m.index + m[0].length - 1, at: m.index, decl: Boolean(m[3]) })),
  ];
  for (const h of heads) {
    const paramsEnd = closeOf(mask, h.paren);
    const params = mask.slice(h.paren + 1, paramsEnd - 1);
    // past an optional return type (`: Promise<{ a: b }>`), to the body: `{` or `=>`
    let k = paramsEnd;
    const skipSpace = () => {
      while (/\s/.test(mask[k] ?? '')) k++;
    };
    skipSpace();
    if (mask[k] === ':') {
      k++;
      skipSpace();
      let depth = 0;
      let started = false;
      for (; k < mask.length; k++) {
        const c = mask[k];
        if (depth === 0 && started && (c === '{' || (c === '=' && mask[k + 1] === '>'))) break;
        if ('<([{'.includes(c)) depth++;
        else if ((c === '>' && mask[k - 1] !== '=') || ')]}'.includes(c)) depth--;
        if (depth < 0) break;
        started = true;
      }
    }
    skipSpace();
    if (mask[k] === '=' && mask[k + 1] === '>') {
      k += 2;
      skipSpace();
      // a block body, or an expression up to the end of its statement
      const end = mask[k] === '{' || mask[k] === '(' ? closeOf(mask, k) : mask.indexOf(';', k) + 1 || mask.length;
      out.push({ name: h.name, start: h.at, bodyStart: k, end, params: paramNames(params) });
    } else if (mask[k] === '{' && h.decl) {
      out.push({ name: h.name, start: h.at, bodyStart: k, end: closeOf(mask, k), params: paramNames(params) });
    }
  }
  return out;
}

/** The arguments (their source text) of the call whose `(` is at `paren`. */
function callArgs(S, paren) {
  const end = closeOf(S.mask, paren);
  const args = [];
  let depth = 0;
  let from = paren + 1;
  for (let i = paren + 1; i < end - 1; i++) {
    const c = S.mask[i];
    if ('([{'.includes(c)) depth++;
    else if (')]}'.includes(c)) depth--;
    else if (c === ',' && depth === 0) {
      args.push(S.code.slice(from, i).trim());
      from = i + 1;
    }
  }
  const last = S.code.slice(from, end - 1).trim();
  if (last) args.push(last);
  return { args, text: S.code.slice(paren + 1, end - 1).trim() };
}

const README_BLOCK_CLI = (() => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const from = readme.indexOf('## First steps');
  if (from < 0) return 0;
  const section = readme.slice(from, readme.indexOf('\n## ', from + 5));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  return (block.match(/npm run cli/g) ?? []).length;
})();

const PRIMITIVES = { startServer: 'server', runServiceToExit: 'exit', runCliProcess: 'cli', runCli: 'inproc' };
const isDefinition = (mask, at) => /\bfunction\s*\*?\s*$/.test(mask.slice(Math.max(0, at - 20), at));

/** The process sites written directly in a source (helpers not resolved): [{kind, at, n, why}]. */
function primitiveSites(S, file) {
  // the harness's own definitions and internal calls are what the others call
  if (rel(file) === 'bench/harness/server.ts') return [];
  const sites = [];
  for (const m of S.mask.matchAll(/(?<![\w$.])(startServer|runServiceToExit|runCliProcess|runCli)\s*\(/g)) {
    if (!isDefinition(S.mask, m.index)) sites.push({ kind: PRIMITIVES[m[1]], at: m.index, n: 1, why: `${m[1]}()` });
  }
  // a default (`(opts.startFinal ?? startServer)(...)`): counted at a call of its helper unless
  // the call's options argument names the field (helpersOf, callTimes)
  for (const m of S.mask.matchAll(/\(\s*([A-Za-z_$][\w$]*)\.([A-Za-z_$][\w$]*)\s*\?\?\s*(startServer|runServiceToExit|runCliProcess)\s*\)\s*\(/g)) {
    sites.push({ kind: PRIMITIVES[m[3]], at: m.index, n: 1, why: `${m[3]}() unless ${m[1]}.${m[2]} is given`, defaultOf: { param: m[1], field: m[2] } });
  }
  for (const m of S.mask.matchAll(/\.cli\s*\(/g)) sites.push({ kind: 'inproc', at: m.index, n: 1, why: '<server>.cli() (in-process)' });
  for (const m of S.mask.matchAll(/(?<![\w$.])(spawnChild|spawnChildSync|spawn|spawnSync|runChild|execFile|execFileSync|fork)\s*\(/g)) {
    if (isDefinition(S.mask, m.index)) continue;
    const { text } = callArgs(S, m.index + m[0].length - 1);
    if (/CLI_ARGS|cli\/(main|bin)\.(js|ts)|^'npm',[^]*'run',\s*'cli'/.test(text)) sites.push({ kind: 'cli', at: m.index, n: 1, why: `${m[1]}(the CLI)` });
    else if (/SERVICE_ARGS|(^|[^/\w])src\/main\.(js|ts)|^'npm',[^]*\['(start|run)'/.test(text)) sites.push({ kind: 'server', at: m.index, n: 1, why: `${m[1]}(the service)` });
    else if (/^'sh'/.test(text) && /replaceAll\('npm run cli/.test(S.code)) {
      sites.push({ kind: 'cli', at: m.index, n: README_BLOCK_CLI, why: `sh running the README's First steps (${README_BLOCK_CLI} x npm run cli)` });
    }
  }
  return sites;
}

/** Functions whose bodies start processes: a call of one counts what its body starts. */
function helpersOf(S, file) {
  const sites = primitiveSites(S, file);
  const loops = loopSpans(S);
  const helpers = new Map();
  for (const fn of functionBodies(S.mask)) {
    const inner = sites.filter((s) => s.at >= fn.bodyStart && s.at < fn.end).map((s) => {
      const l = loopFactor(loops, s.at, fn.bodyStart, fn.params);
      const byParam = [...l.byParam];
      // a default start runs 0 times when the call gives the option, once when it does not
      if (s.defaultOf && fn.params.includes(s.defaultOf.param)) byParam.push({ arg: fn.params.indexOf(s.defaultOf.param), field: s.defaultOf.field, unlessGiven: true });
      return { ...s, times: l.times, loop: l.unknown || (s.defaultOf && !fn.params.includes(s.defaultOf.param)), upTo: l.upTo, byParam };
    });
    if (inner.length === 0) continue;
    // `Array.from({ length: count }, () => startServer(...))` with `count` a parameter: the
    // call's argument says how many
    const lengthParam = /Array\.from\(\{\s*length:\s*([A-Za-z_$][\w$]*)\s*\}/.exec(S.mask.slice(fn.bodyStart, fn.end))?.[1];
    const multiplierArg = lengthParam ? fn.params.indexOf(lengthParam) : -1;
    for (const s of inner) if (multiplierArg >= 0 && s.loop) s.loop = false; // counted by the multiplier
    helpers.set(fn.name, { file, span: [fn.start, fn.end], sites: inner, multiplierArg });
  }
  return helpers;
}

function analyse() {
  const files = [...walk(path.join(ROOT, 'test')), ...walk(path.join(ROOT, 'bench'))].filter((f) => !rel(f).startsWith('bench/results/') && !rel(f).startsWith('bench/experiments/'));
  const sources = new Map(files.map((f) => [f, lex(fs.readFileSync(f, 'utf8'))]));
  const isTest = (f) => /^test\/.*\.test\.ts$/.test(rel(f));
  // helpers of other modules: test/ modules that are not test files, and bench/ (harness, soak)
  const global = new Map();
  for (const [f, S] of sources) {
    if (isTest(f)) continue;
    for (const [name, h] of helpersOf(S, f)) if (!global.has(name)) global.set(name, h);
  }
  const perFile = [];
  for (const [f, S] of sources) {
    if (!isTest(f)) continue;
    const local = helpersOf(S, f);
    const loops = loopSpans(S);
    const insideLocal = (at, except) => [...local.values()].some((h) => h !== except && at >= h.span[0] && at < h.span[1]);
    const counted = [];
    // direct sites, except inside a local helper (those count at the helper's calls)
    for (const s of primitiveSites(S, f)) {
      if (insideLocal(s.at)) continue;
      const l = loopFactor(loops, s.at);
      counted.push({ ...s, n: s.n * l.times, why: l.times !== 1 ? `${s.why} x ${l.times} (loop)` : s.why, line: lineOf(S.mask, s.at), loop: l.unknown, upTo: l.upTo });
    }
    // a helper of another module counts where the file imports it by name
    const imported = new Set([...S.mask.matchAll(/import\s*(?:type\s*)?\{([^}]*)\}\s*from|const\s*\{([^}]*)\}\s*=\s*await\s+import\s*\(/g)]
      .flatMap((m) => (m[1] ?? m[2]).split(',').map((x) => x.trim().split(/\s+as\s+/).pop())));
    const helpers = new Map([...[...global].filter(([n]) => imported.has(n)), ...local]);
    for (const [name, h] of helpers) {
      if (name in PRIMITIVES) continue;
      for (const m of S.mask.matchAll(new RegExp(`(?<![\\w$.])${name.replace(/\$/g, '\\$')}\\s*\\(`, 'g'))) {
        if (isDefinition(S.mask, m.index)) continue;
        const own = local.get(name);
        if (own && m.index >= own.span[0] && m.index < own.span[1]) continue; // its own body (recursion)
        if (insideLocal(m.index, own)) continue; // counted through the local helper it sits in
        const { args } = callArgs(S, m.index + m[0].length - 1);
        const mult = h.multiplierArg >= 0 ? Number(args[h.multiplierArg]) : 1;
        const l = loopFactor(loops, m.index);
        for (const s of h.sites) {
          const byCall = s.byParam?.length ? callTimes(S, s.byParam, args) : 1;
          const unknown = !Number.isFinite(mult) || byCall === null;
          const times = l.times * s.times * (byCall ?? 1);
          counted.push({
            kind: s.kind,
            n: s.n * (unknown ? 1 : mult) * times,
            why: `${name}() -> ${s.why}${h.multiplierArg >= 0 ? ` x ${args[h.multiplierArg]}` : ''}${s.byParam?.some((b) => b.unlessGiven) ? (times === 0 ? ': given, 0' : ': not given') : times !== 1 ? ` x ${times} (loop${s.byParam?.length ? `: ${s.byParam.map((b) => b.field).join(', ')} at the call` : ''})` : ''}`,
            line: lineOf(S.mask, m.index),
            loop: l.unknown || s.loop || unknown,
            upTo: l.upTo || s.upTo,
          });
        }
      }
    }
    const sum = (kind) => counted.filter((s) => s.kind === kind).reduce((a, s) => a + s.n, 0);
    if (counted.length > 0) {
      perFile.push({ file: rel(f), servers: sum('server'), exits: sum('exit'), cli: sum('cli'), inproc: sum('inproc'), loopSites: counted.filter((s) => s.loop && s.kind !== 'inproc').length, upToSites: counted.filter((s) => s.upTo && !s.loop && s.kind !== 'inproc').length, sites: counted.sort((a, b) => a.line - b.line) });
    }
  }
  perFile.sort((a, b) => a.file.localeCompare(b.file));
  const total = (k) => perFile.reduce((a, f) => a + f[k], 0);
  return {
    testFiles: [...sources.keys()].filter(isTest).length,
    files: perFile,
    totals: {
      servers: total('servers'),
      serverFiles: perFile.filter((f) => f.servers > 0).length,
      exits: total('exits'),
      cli: total('cli'),
      cliFiles: perFile.filter((f) => f.cli > 0).length,
      inproc: total('inproc'),
      inprocFiles: perFile.filter((f) => f.inproc > 0).length,
      loopSites: total('loopSites'),
      upToSites: total('upToSites'),
    },
  };
}

function printStatic(r) {
  const w = Math.max(...r.files.map((f) => f.file.length), 4);
  console.log(`${'file'.padEnd(w)}  servers  exits  cli  cli-in-process  sites-in-loops`);
  for (const f of r.files) {
    console.log(`${f.file.padEnd(w)}  ${String(f.servers).padStart(7)}  ${String(f.exits).padStart(5)}  ${String(f.cli).padStart(3)}  ${String(f.inproc).padStart(14)}  ${f.loopSites ? String(f.loopSites).padStart(14) : ''}`);
  }
  const t = r.totals;
  console.log('');
  console.log(`test files: ${r.testFiles}, of which ${r.files.length} start a service or CLI process`);
  console.log(`full-server starts: ${t.servers} (in ${t.serverFiles} files)`);
  console.log(`service starts refused during start-up (runServiceToExit): ${t.exits}`);
  console.log(`CLI processes: ${t.cli} (in ${t.cliFiles} files)`);
  console.log(`CLI commands run in-process (runCli, <server>.cli()): ${t.inproc} (in ${t.inprocFiles} files), no process each`);
  console.log(`note: a site in a loop counts once per iteration where the source says how many (an array literal or const, Array.from({ length: N }), i < N); ${t.loopSites} site(s) sit in a loop whose count it does not say, ${t.upToSites} in a loop that may break early: each of those counts once, and a run starts more. --run <files> counts a run; --json lists every site.`);
}

function runCount(files) {
  const log = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'lv-count-')), 'processes.log');
  fs.writeFileSync(log, '');
  const r = spawnSync('npx', ['tap', ...files], { cwd: ROOT, stdio: 'inherit', env: { ...process.env, LV_COUNT_PROCESSES: log } });
  const by = new Map();
  for (const line of fs.readFileSync(log, 'utf8').split('\n').filter(Boolean)) {
    const [kind, file] = line.split(' ');
    const e = by.get(file) ?? { server: 0, cli: 0, inproc: 0 };
    e[kind] += 1;
    by.set(file, e);
  }
  console.log('\nprocesses the harness started during the run (LV_COUNT_PROCESSES, bench/harness/server.ts):');
  for (const [file, e] of [...by].sort()) console.log(`  ${file}: ${e.server} service, ${e.cli} CLI, ${e.inproc} CLI in-process`);
  const sum = (k) => [...by.values()].reduce((a, e) => a + e[k], 0);
  console.log(`total: ${sum('server')} service processes (starts and refused starts), ${sum('cli')} CLI processes, ${sum('inproc')} CLI commands in-process (no process); tap exited ${r.status}`);
  console.log('(a CLI a test runs through sh, as test/cli/first-steps.test.ts does, goes around the harness and is not in this figure)');
  process.exitCode = r.status ?? 1;
}

const argv = process.argv.slice(2);
if (argv[0] === '--run') runCount(argv.slice(1));
else if (argv[0] === '--json') console.log(JSON.stringify(analyse(), null, 2));
else printStatic(analyse());
