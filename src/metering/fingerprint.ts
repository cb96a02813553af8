import { createHash } from 'node:crypto';

/** JSON with object keys sorted and no whitespace: two metadata texts that differ only in key
 * order or spacing are the same logical payload (spec: idempotency replay table). */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const obj = value as Record<string, unknown>;
  return `{${Object.keys(obj).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(',')}}`;
}

/** What makes two requests "the same": module, canonical metadata, every part's name and
 * SHA-256 (sorted by name, as multipart order carries no meaning). */
export function requestFingerprint(moduleId: string, metadata: unknown, parts: { name: string; sha256: string }[]): string {
  const h = createHash('sha256');
  h.update(moduleId).update('\n').update(canonicalJson(metadata)).update('\n');
  for (const p of [...parts].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) h.update(JSON.stringify([p.name, p.sha256])).update('\n');
  return h.digest('hex');
}
