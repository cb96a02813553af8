// src/verify/outcomes.ts lists every answer a verify call can get. A refusal the use case
// raises itself must be on that list, or the list stops being the place a reader learns them.

import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ERRORS } from '../../src/errors/index.ts';
import { ANSWERS } from '../../src/verify/index.ts';
import { ROOT } from '../helpers/server.ts';

const listed = new Set<string>(Object.values(ANSWERS).flat());

t.test('every ServiceError the use case raises is a listed answer', async (t) => {
  const dir = path.join(ROOT, 'src', 'verify');
  const raised = new Set<string>();
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
    for (const m of fs.readFileSync(path.join(dir, file), 'utf8').matchAll(/new ServiceError\(\s*'([a-z_]+)'/g)) raised.add(m[1]!);
  }
  t.ok(raised.size >= 6, `the scan finds the use case's own refusals (${[...raised].join(', ')})`);
  for (const code of raised) t.ok(listed.has(code), `${code} is listed in src/verify/outcomes.ts`);
});

t.test('every listed refusal is a code of the catalogue', async (t) => {
  for (const code of listed) {
    if (['verdict', 'replayed', 'client_disconnected'].includes(code)) continue;
    t.ok(code in ERRORS, `${code} is in src/errors/codes.ts`);
  }
});
