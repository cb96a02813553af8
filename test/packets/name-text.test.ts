import t from 'tap';
import { isNameText } from '../../src/packets/index.ts';
import { TokenNameSchema } from '../../src/admin/schemas.ts';

// A token name's rule is the format (src/packets/name-text.ts, which the service applies) and,
// for clients, the pattern the OpenAPI document carries (src/admin/schemas.ts): the two must
// say the same over every character of the Basic Multilingual Plane, alone and between letters,
// with and without the regex u flag (a client's tool may use either). Lone surrogates and the
// few format characters beyond U+FFFF are the format's alone (the schema says so).
t.test('the OpenAPI pattern of a token name says what the format does, over the whole BMP', async (t) => {
  const pattern = (TokenNameSchema as { pattern: string }).pattern;
  const plain = new RegExp(pattern);
  const unicode = new RegExp(pattern, 'u');
  const differ: string[] = [];
  for (let c = 0; c <= 0xffff; c++) {
    if (c >= 0xd800 && c <= 0xdfff) continue;
    const ch = String.fromCharCode(c);
    for (const name of [ch, `a${ch}a`]) {
      const format = isNameText(name);
      if (plain.test(name) !== format || unicode.test(name) !== format) differ.push(`U+${c.toString(16).padStart(4, '0')} in ${JSON.stringify(name)}`);
    }
  }
  t.same(differ.slice(0, 20), [], `${differ.length} disagreements`);
});

t.test('names that list alike are not two names: invisible characters of every kind are refused', async (t) => {
  // review3: zero-width and format characters (Cf); review3b: invisible ones outside Cf
  for (const c of ['\u200b', '\ufeff', '\u00ad', '\u202e', '\u034f', '\u3164', '\u115f', '\uffa0', '\ufe0f', '\u{e0041}']) {
    t.notOk(isNameText(`branch-7${c}`), `U+${c.codePointAt(0)!.toString(16)} after a name`);
  }
  for (const ok of ['branch-7', 'Filiale Straße 7', 'kiosk 🦊', 'Cafe\u0301', '分店 1', 'فرع ٧']) t.ok(isNameText(ok), ok);
});
