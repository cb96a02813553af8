// Part header block (RFC 7578 section 4): Content-Disposition is required and must be
// `form-data` with a `name`; Content-Type is optional. Other headers are ignored, as RFC 7578
// tells receivers to do with Content-Transfer-Encoding and anything unknown.

import { TOKEN, readQuoted, skipOws } from './syntax.ts';
import { MultipartError } from './errors.ts';

export interface PartHeaders {
  name: string;
  filename: string | null;
  contentType: string | null;
}

/** `text` is the header block without its terminating blank line, lines joined by CRLF. */
export function parsePartHeaders(text: string): PartHeaders {
  let disposition: string | null = null;
  let contentType: string | null = null;
  if (text.length > 0) {
    for (const line of text.split('\r\n')) {
      // Bare CR/LF or obs-fold would let one header smuggle another past a naive reader.
      if (line.includes('\r') || line.includes('\n')) malformed('a part header contains a bare CR or LF');
      if (line.startsWith(' ') || line.startsWith('\t')) malformed('folded part headers are not accepted');
      const colon = line.indexOf(':');
      if (colon <= 0) malformed(`part header line without a name: ${JSON.stringify(clip(line))}`);
      const name = line.slice(0, colon);
      if (!TOKEN.test(name)) malformed(`invalid part header name ${JSON.stringify(clip(name))}`);
      const value = line.slice(colon + 1).trim();
      switch (name.toLowerCase()) {
        case 'content-disposition':
          if (disposition !== null) malformed('a part has two Content-Disposition headers');
          disposition = value;
          break;
        case 'content-type':
          if (contentType !== null) malformed('a part has two Content-Type headers');
          contentType = value;
          break;
      }
    }
  }
  if (disposition === null) malformed('a part has no Content-Disposition header');
  const { name, filename } = parseDisposition(disposition);
  return { name, filename, contentType };
}

function parseDisposition(s: string): { name: string; filename: string | null } {
  let i = s.indexOf(';');
  if (i < 0) i = s.length;
  const type = s.slice(0, i).trim();
  if (type.toLowerCase() !== 'form-data') {
    malformed(`Content-Disposition must be form-data, got ${JSON.stringify(clip(type))}`);
  }
  let name: string | null = null;
  let filename: string | null = null;
  let filenameExt: string | null = null;
  while (i < s.length) {
    i = skipOws(s, i);
    if (i >= s.length) break;
    if (s[i] !== ';') malformed('Content-Disposition parameters must be separated by ";"');
    i = skipOws(s, i + 1);
    if (i >= s.length) break;
    const eq = s.indexOf('=', i);
    if (eq < 0) malformed('Content-Disposition parameter without a value');
    const key = s.slice(i, eq).trim().toLowerCase();
    if (!TOKEN.test(key)) malformed('invalid Content-Disposition parameter name');
    const vStart = skipOws(s, eq + 1);
    let value: string;
    if (s[vStart] === '"') {
      // the encoders' own escaping of names, not RFC 9110's (syntax.ts readQuoted says why)
      const q = readQuoted(s, vStart, 'name');
      if (q === null) malformed('unterminated quoted string in Content-Disposition');
      value = q.value;
      i = q.next;
    } else {
      // Unquoted values run to the next ';' so that a sloppy `filename=my photo.png` still
      // parses; quotes inside one mean the sender lost track of its own quoting.
      let k = s.indexOf(';', vStart);
      if (k < 0) k = s.length;
      value = s.slice(vStart, k).trim();
      if (value.length === 0 || value.includes('"')) malformed(`bad value for Content-Disposition ${key}`);
      i = k;
    }
    switch (key) {
      case 'name':
        if (name !== null) malformed('Content-Disposition names the part twice');
        name = value;
        break;
      case 'filename':
        if (filename !== null) malformed('Content-Disposition has two filename parameters');
        filename = value;
        break;
      case 'filename*':
        // RFC 7578 4.2 forbids filename* but senders still emit it; tolerate it, never fail on it.
        filenameExt = decodeExtValue(value);
        break;
    }
  }
  if (name === null) malformed('Content-Disposition has no name parameter');
  // RFC 6266 4.3: where both are present and filename* decodes, it is the intended name.
  return { name, filename: filenameExt ?? filename };
}

/** RFC 5987 ext-value (`UTF-8''%e2%82%ac.png`); null when it cannot be decoded. */
function decodeExtValue(v: string): string | null {
  const m = /^([A-Za-z0-9!#$%&+\-^_`{}~]+)'[A-Za-z0-9-]*'(.*)$/.exec(v);
  if (m === null) return null;
  const charset = m[1]!.toLowerCase();
  const encoded = m[2]!;
  if (!/^(?:[A-Za-z0-9!#$&+\-.^_`|~]|%[0-9A-Fa-f]{2})*$/.test(encoded)) return null;
  if (charset === 'utf-8') {
    try {
      return decodeURIComponent(encoded);
    } catch {
      return null;
    }
  }
  if (charset === 'iso-8859-1') {
    return encoded.replace(/%([0-9A-Fa-f]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
  }
  return null;
}

function clip(s: string): string {
  return s.length > 60 ? `${s.slice(0, 60)}...` : s;
}

function malformed(message: string): never {
  throw new MultipartError('malformed', message);
}
