// Boundary extraction from the request's Content-Type (RFC 7231 media-type syntax, RFC 7578
// form-data, RFC 2046 boundary grammar). Anything else is answered 415 by the verify endpoint;
// readMultipartContentType says which fault it is, so that a client that did send
// multipart/form-data (with a Content-Type set by hand, typically) learns what is wrong with it
// rather than being told to send what it sent (review 3, F5).

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

/** Why a Content-Type gives no boundary: the unsupported_media_type variant that says so. */
export type ContentTypeFault = 'not_multipart' | 'unreadable_parameters' | 'no_boundary' | 'repeated_boundary' | 'invalid_boundary';

export function readMultipartContentType(contentType: string | undefined): { boundary: string } | { fault: ContentTypeFault } {
  if (contentType === undefined) return { fault: 'not_multipart' };
  const s = contentType;
  let i = skipOws(s, 0);
  const slash = s.indexOf('/', i);
  if (slash < 0) return { fault: 'not_multipart' };
  let end = slash + 1;
  while (end < s.length && s[end] !== ';' && s[end] !== ' ' && s[end] !== '\t') end++;
  const type = s.slice(i, slash);
  const subtype = s.slice(slash + 1, end);
  if (type.toLowerCase() !== 'multipart' || subtype.toLowerCase() !== 'form-data') return { fault: 'not_multipart' };

  const unreadable = { fault: 'unreadable_parameters' } as const;
  let boundary: string | null = null;
  i = end;
  for (;;) {
    i = skipOws(s, i);
    if (i >= s.length) break;
    if (s[i] !== ';') return unreadable;
    i = skipOws(s, i + 1);
    if (i >= s.length) break; // a trailing ';' is harmless and some clients send it
    const eq = s.indexOf('=', i);
    if (eq < 0) return unreadable;
    const name = s.slice(i, eq);
    if (!TOKEN.test(name)) return unreadable;
    let value: string;
    if (s[eq + 1] === '"') {
      const q = readQuoted(s, eq + 1);
      if (q === null) return unreadable;
      value = q.value;
      i = q.next;
    } else {
      // Unquoted values are read up to the next separator rather than as a strict token: a
      // boundary such as `a:b` is unambiguous there and the bchars check below still applies.
      let j = eq + 1;
      while (j < s.length && s[j] !== ';' && s[j] !== ' ' && s[j] !== '\t') j++;
      value = s.slice(eq + 1, j);
      if (value.length === 0) return name.toLowerCase() === 'boundary' ? { fault: 'invalid_boundary' } : unreadable;
      i = j;
    }
    if (name.toLowerCase() === 'boundary') {
      // two boundaries: which one the client meant is unknowable
      if (boundary !== null) return { fault: 'repeated_boundary' };
      boundary = value;
    }
  }
  if (boundary === null) return { fault: 'no_boundary' };
  return isValidBoundary(boundary) ? { boundary } : { fault: 'invalid_boundary' };
}

/** The boundary, or null for anything the verify endpoint answers with 415. */
export function parseMultipartBoundary(contentType: string | undefined): string | null {
  const read = readMultipartContentType(contentType);
  return 'boundary' in read ? read.boundary : null;
}
