import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../helpers/server.ts';

// The docs say one thing about what is shipped (issue 39 item 8: docs/operations.md said "No
// container file is shipped" beside a Containerfile and docs/container.md). Every relative link
// of the README and docs/ names a file or folder that exists, and the operations guide points
// to the container files that are there.
const pages = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

t.test('every relative link in README.md and docs/*.md names something that exists', async (t) => {
  const broken: string[] = [];
  let links = 0;
  for (const page of pages) {
    const text = fs.readFileSync(path.join(ROOT, page), 'utf8').replace(/```[\s\S]*?```/g, '');
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/i.test(target!) || target!.startsWith('#')) continue;
      links++;
      const file = target!.split('#')[0]!;
      if (!fs.existsSync(path.resolve(ROOT, path.dirname(page), file))) broken.push(`${page}: ${target}`);
    }
  }
  t.ok(links > 50, `${links} links checked`);
  t.same(broken, [], 'links to nothing');
});

t.test('the operations guide names the container files that are shipped', async (t) => {
  t.ok(fs.existsSync(path.join(ROOT, 'Containerfile')), 'a Containerfile is shipped');
  const operations = fs.readFileSync(path.join(ROOT, 'docs/operations.md'), 'utf8');
  t.notMatch(operations, /no container file/i, 'so no page says there is none');
  t.match(operations, /\[`docs\/container\.md`\]\(container\.md\)/, 'and operations.md points to docs/container.md');
  t.match(operations, '`Containerfile`');
});
