import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { ISSUE_TYPES } from '../../src/errors/issue-types.ts';
import { ROOT } from '../helpers/server.ts';

// The 422 item types are written where each rule lives; the OpenAPI document lists them from
// ISSUE_TYPES. This scan finds every literal an emitter can send, so a new rule with a new
// type cannot reach clients undocumented.
const EMITTERS = [
  /\bImageError\(\s*'([a-z0-9_]+)'/g,
  /\.issue\(\s*(?:\[[^\]]*\]|[A-Za-z_.]+)\s*,\s*'([a-z0-9_]+)'/g,
  /\btype:\s*'([a-z0-9_]+)'/g,
];
// `type:` literals that are not issue types: JSON Schema and HTML input types
const NOT_ISSUES = new Set(['object', 'string', 'integer', 'number', 'boolean', 'array', 'null', 'http', 'apiKey', 'button', 'submit', 'password', 'checkbox']);

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

t.test('every issue type the sources emit is in ISSUE_TYPES', async (t) => {
  const found = new Set<string>();
  for (const file of sources(path.join(ROOT, 'src'))) {
    const text = fs.readFileSync(file, 'utf8');
    // only modules that build 422 items
    if (!/ValidationIssue|ValidationFailure|ImageError|\.issue\(/.test(text)) continue;
    for (const re of EMITTERS) for (const m of text.matchAll(re)) if (!NOT_ISSUES.has(m[1]!)) found.add(m[1]!);
  }
  const known = new Set<string>(ISSUE_TYPES);
  t.same([...found].filter((x) => !known.has(x)).sort(), [], 'undocumented issue types');
  t.ok(found.size >= 60, `the scan sees the emitters (${found.size} types)`);
  t.same([...known].filter((x) => !found.has(x)).sort(), [], 'catalogue entries nothing emits');
});
