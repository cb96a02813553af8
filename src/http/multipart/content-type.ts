// Boundary extraction from the request's Content-Type (RFC 7231 media-type syntax, RFC 7578
// form-data, RFC 2046 boundary grammar). Returns null for anything the verify endpoint must
// answer with 415, so the caller has a single check.

import { TOKEN, readQuoted, skipOws } from './syntax.ts';

const MAX_BOUNDARY = 70;

// RFC 2046 bcharsnospace; a space is allowed inside a boundary but not as its last character.
const BCHAR_NOSPACE = /^[0-9A-Za-z'()+_,\-./:=?]$/;

export function isValidBoundary(boundary: string): boolean {
  if (boundary.length < 1 || boundary.length > MAX_BOUNDARY) return false;
  for (let i = 0; i < boundary.length; i++) {
    const c = boundary[i]!;
    if (c === ' ' ? i === boundary.length - 1 : !BCHAR_NOSPACE.test(c)) return false;
  }
  return true;
}

export function parseMultipartBoundary(contentType: string | undefined): string | null {
  if (contentType === undefined) return null;
  const s = contentType;
  let i = skipOws(s, 0);
  const slash = s.indexOf('/', i);
  if (slash < 0) return null;
  let end = slash + 1;
  while (end < s.length && s[end] !== ';' && s[end] !== ' ' && s[end] !== '\t') end++;
  const type = s.slice(i, slash);
  const subtype = s.slice(slash + 1, end);
  if (type.toLowerCase() !== 'multipart' || subtype.toLowerCase() !== 'form-data') return null;

  let boundary: string | null = null;
  i = end;
  for (;;) {
    i = skipOws(s, i);
    if (i >= s.length) break;
    if (s[i] !== ';') return null;
    i = skipOws(s, i + 1);
    if (i >= s.length) break; // a trailing ';' is harmless and some clients send it
    const eq = s.indexOf('=', i);
    if (eq < 0) return null;
    const name = s.slice(i, eq);
    if (!TOKEN.test(name)) return null;
    let value: string;
    if (s[eq + 1] === '"') {
      const q = readQuoted(s, eq + 1);
      if (q === null) return null;
      value = q.value;
      i = q.next;
    } else {
      // Unquoted values are read up to the next separator rather than as a strict token: a
      // boundary such as `a:b` is unambiguous there and the bchars check below still applies.
      let j = eq + 1;
      while (j < s.length && s[j] !== ';' && s[j] !== ' ' && s[j] !== '\t') j++;
      value = s.slice(eq + 1, j);
      if (value.length === 0) return null;
      i = j;
    }
    if (name.toLowerCase() === 'boundary') {
      if (boundary !== null) return null; // two boundaries: which one the client meant is unknowable
      boundary = value;
    }
  }
  return boundary !== null && isValidBoundary(boundary) ? boundary : null;
}
