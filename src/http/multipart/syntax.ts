// HTTP header-value lexing shared by the request Content-Type and the part headers (RFC 7230
// section 3.2.6); both use the same token and quoted-string rules.

export const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

export function skipOws(s: string, i: number): number {
  while (i < s.length && (s[i] === ' ' || s[i] === '\t')) i++;
  return i;
}

/** quoted-string starting at the opening quote, with quoted-pair escapes; null if unterminated. */
export function readQuoted(s: string, open: number): { value: string; next: number } | null {
  let value = '';
  let i = open + 1;
  while (i < s.length) {
    const c = s[i]!;
    if (c === '"') return { value, next: i + 1 };
    if (c === '\\') {
      if (i + 1 >= s.length) return null;
      value += s[i + 1];
      i += 2;
    } else {
      value += c;
      i++;
    }
  }
  return null;
}
