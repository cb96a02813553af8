import { randomBytes } from 'node:crypto';

/** Opaque record ids: a type prefix for humans, 72 random bits against collisions. */
export function newId(prefix: 'usr' | 'tok' | 'req' | 'res'): string {
  return `${prefix}_${randomBytes(9).toString('base64url')}`;
}
