import t from 'tap';
import { parseMultipartBoundary, readMultipartContentType } from '../../src/http/multipart/index.ts';

t.test('accepts multipart/form-data with a boundary, quoted or not, any case', async (t) => {
  t.equal(parseMultipartBoundary('multipart/form-data; boundary=abc123'), 'abc123');
  t.equal(parseMultipartBoundary('Multipart/Form-Data; BOUNDARY=abc'), 'abc');
  t.equal(parseMultipartBoundary('multipart/form-data;boundary="a b:c"'), 'a b:c');
  t.equal(parseMultipartBoundary('  multipart/form-data ;  boundary=xyz  '), 'xyz');
  t.equal(parseMultipartBoundary('multipart/form-data; charset=utf-8; boundary=q'), 'q');
  t.equal(parseMultipartBoundary('multipart/form-data; boundary=q;'), 'q');
  t.equal(parseMultipartBoundary('multipart/form-data; boundary="q\\"x"'), null, 'a quote is no bchar');
  t.equal(parseMultipartBoundary('multipart/form-data; boundary="a\\bc"'), 'abc', 'quoted-pair unescaped');
  t.equal(
    parseMultipartBoundary('multipart/form-data; boundary=----WebKitFormBoundary7MA4YWxkTrZu0gW'),
    '----WebKitFormBoundary7MA4YWxkTrZu0gW',
  );
  t.equal(parseMultipartBoundary(`multipart/form-data; boundary="${"'()+_,-./:=?"}"`), "'()+_,-./:=?");
});

t.test('boundary length is 1..70', async (t) => {
  t.equal(parseMultipartBoundary(`multipart/form-data; boundary=${'a'.repeat(70)}`), 'a'.repeat(70));
  t.equal(parseMultipartBoundary(`multipart/form-data; boundary=${'a'.repeat(71)}`), null);
  t.equal(parseMultipartBoundary('multipart/form-data; boundary=""'), null);
  t.equal(parseMultipartBoundary('multipart/form-data; boundary='), null);
});

t.test('rejects anything else so the caller can answer 415', async (t) => {
  const bad: (string | undefined)[] = [
    undefined,
    '',
    'application/json',
    'multipart/mixed; boundary=abc',
    'multipart/form-data',
    'multipart/form-data; charset=utf-8',
    'multipart/form-datax; boundary=abc',
    'multipart/form-data boundary=abc',
    'multipart/form-data; boundary=a; boundary=b',
    'multipart/form-data; boundary="abc ', // unterminated
    'multipart/form-data; boundary="abc "', // trailing space forbidden by RFC 2046
    'multipart/form-data; boundary=ab\u00e9',
    'multipart/form-data; boundary="ab*c"',
    'multipart/form-data; boundary=abc garbage',
    'multipart/form-data; =abc',
    'text/plain; boundary=abc',
  ];
  for (const ct of bad) t.equal(parseMultipartBoundary(ct), null, String(ct));
});

// review 3, F5: a client that did send multipart/form-data learns what is wrong with its
// Content-Type (the 415's message is the fault's variant, src/errors/codes.ts)
t.test('readMultipartContentType names the fault', async (t) => {
  const cases: [string | undefined, string][] = [
    [undefined, 'not_multipart'],
    ['application/json', 'not_multipart'],
    ['multipart/mixed; boundary=abc', 'not_multipart'],
    ['multipart/form-data', 'no_boundary'],
    ['multipart/form-data;', 'no_boundary'],
    ['multipart/form-data; charset=utf-8', 'no_boundary'],
    ['multipart/form-data; boundary=a; boundary=b', 'repeated_boundary'],
    ['multipart/form-data; boundary=a; BOUNDARY="a"', 'repeated_boundary'],
    [`multipart/form-data; boundary=${'a'.repeat(71)}`, 'invalid_boundary'],
    ['multipart/form-data; boundary=', 'invalid_boundary'],
    ['multipart/form-data; boundary=""', 'invalid_boundary'],
    ['multipart/form-data; boundary="abc "', 'invalid_boundary'],
    ['multipart/form-data; boundary="ab*c"', 'invalid_boundary'],
    ['multipart/form-data boundary=abc', 'unreadable_parameters'],
    ['multipart/form-data; boundary="abc ', 'unreadable_parameters'],
    ['multipart/form-data; =abc', 'unreadable_parameters'],
    ['multipart/form-data; boundary=abc garbage', 'unreadable_parameters'],
  ];
  for (const [ct, fault] of cases) t.same(readMultipartContentType(ct), { fault }, String(ct));
  t.same(readMultipartContentType(`multipart/form-data; boundary=${'a'.repeat(70)}`), { boundary: 'a'.repeat(70) });
});
