// HTTP header-value lexing shared by the request Content-Type and the part headers (RFC 7230
// section 3.2.6); both use the same token and quoted-string rules.

export const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

export function skipOws(s: string, i: number): number {
  while (i < s.length && (s[i] === ' ' || s[i] === '\t')) i++;
  return i;
}

/** quoted-string starting at the opening quote; null if unterminated. With `backslashes:
 * 'pair'` (RFC 9110's quoted-pair, the request's Content-Type) a backslash escapes any
 * character. With `'name'` (a part's Content-Disposition name) it escapes only a double quote
 * or a backslash (`\"`, `\\`, as the encoders that escape use it: Python's urllib3 and httpx
 * write a name's `\` as `\\`) and is itself otherwise: browsers, undici and curl send a name's
 * backslash raw (WHATWG FormData escapes only `"` and line breaks, as %22 and %0D%0A), so
 * `cam\f0` is the name `cam\f0`, not `camf0`. Both kinds of encoder then deliver a
 * Windows-style folder prefix whole. */
export function readQuoted(s: string, open: number, backslashes: 'pair' | 'name' = 'pair'): { value: string; next: number } | null {
  let value = '';
  let i = open + 1;
  while (i < s.length) {
    const c = s[i]!;
    if (c === '"') return { value, next: i + 1 };
    const next = s[i + 1];
    if (c === '\\' && (backslashes === 'pair' ? next !== undefined : next === '"' || next === '\\')) {
      value += next;
      i += 2;
    } else if (c === '\\' && backslashes === 'pair') {
      return null;
    } else {
      value += c;
      i++;
    }
  }
  return null;
}
