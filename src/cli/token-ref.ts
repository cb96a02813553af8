import type { CallerReads, TokenAdmin } from '../store/index.ts';
import { ConflictError, NotFoundError, UsageError } from './errors.ts';

/** A token by id or by name (names are unique, case ignored), as an operator knows it. */
export async function tokenId(store: Pick<CallerReads, 'getToken'> & Pick<TokenAdmin, 'listTokens'>, ref: string | undefined): Promise<string> {
  if (!ref) throw new UsageError('a token id or name is required');
  const byId = await store.getToken(ref);
  const all = await store.listTokens();
  if (byId) {
    // a token may be named like another's id (names are free text): the one meant cannot be told
    // (the id won, silently, and `token revoke tok_A` revoked the token whose id it is)
    const alsoNamed = all.filter((t) => t.id !== ref && t.name.toLowerCase() === ref.toLowerCase());
    if (alsoNamed.length > 0) throw new ConflictError(`${JSON.stringify(ref)} is the id of one token and the name of ${alsoNamed.map((t) => t.id).join(', ')}: rename that one (token names are unique), or name the other by its name (${JSON.stringify(byId.name)})`);
    return ref;
  }
  let named = all.filter((t) => t.name === ref);
  if (named.length === 0) named = all.filter((t) => t.name.toLowerCase() === ref.toLowerCase());
  if (named.length === 0) throw new NotFoundError(`unknown token ${JSON.stringify(ref)} (neither an id nor a name)`);
  // stores written before names were unique may hold duplicates: the id tells them apart
  if (named.length > 1) throw new ConflictError(`${named.length} tokens are named ${JSON.stringify(ref)}: use the id (${named.map((t) => t.id).join(', ')})`);
  return named[0]!.id;
}
