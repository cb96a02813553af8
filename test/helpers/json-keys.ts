// JSON.parse keeps the last of two equal keys in an object without a word, so a log line that
// names a field twice reads as if it had said it once. This reads the raw text instead.

/** The keys `text` (one JSON value) gives twice in one object, as `path.key`; throws on text
 * that is not JSON. */
export function duplicateKeys(text: string): string[] {
  let i = 0;
  const found: string[] = [];
  const fail = (what: string): never => {
    throw new Error(`not JSON at ${i} (${what}): ${text.slice(Math.max(0, i - 20), i + 20)}`);
  };
  const space = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const string = (): string => {
    const m = /^"(?:[^"\\]|\\.)*"/.exec(text.slice(i));
    if (!m) fail('a string');
    i += m![0].length;
    return JSON.parse(m![0]) as string;
  };
  const value = (path: string): void => {
    space();
    const c = text[i];
    if (c === '{') {
      i++;
      const keys = new Set<string>();
      space();
      if (text[i] === '}') {
        i++;
        return;
      }
      for (;;) {
        space();
        const key = string();
        if (keys.has(key)) found.push(path === '' ? key : `${path}.${key}`);
        keys.add(key);
        space();
        if (text[i++] !== ':') fail('a colon');
        value(path === '' ? key : `${path}.${key}`);
        space();
        const next = text[i++];
        if (next === '}') return;
        if (next !== ',') fail('a comma or the object\'s end');
      }
    }
    if (c === '[') {
      i++;
      space();
      if (text[i] === ']') {
        i++;
        return;
      }
      for (let n = 0; ; n++) {
        value(`${path}[${n}]`);
        space();
        const next = text[i++];
        if (next === ']') return;
        if (next !== ',') fail('a comma or the array\'s end');
      }
    }
    if (c === '"') {
      string();
      return;
    }
    const m = /^(?:true|false|null|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(text.slice(i));
    if (!m) fail('a value');
    i += m![0].length;
  };
  value('');
  space();
  if (i !== text.length) fail('the end');
  return found;
}
