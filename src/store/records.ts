import type { JWK } from 'jose';
import type { ModuleId } from '../packets/types.ts';

export type Role = 'admin' | 'user';
export type Period = 'day' | 'month' | 'never';

export interface UserRecord {
  id: string;
  username: string;
  role: Role;
  enabled: boolean;
  password_hash: string;
  created_at: string;
}

export interface Grant {
  module_id: ModuleId;
  limit: number | null;
  period: Period;
}

export interface TokenRecord {
  id: string;
  name: string;
  /** first characters of the plaintext, enough to recognise it in a list, too few to use */
  token_prefix: string;
  /** hex SHA-256 of the plaintext; the plaintext itself is never stored */
  hash: string;
  enabled: boolean;
  expires_at: string | null;
  demo: boolean;
  revoked: boolean;
  created_at: string;
  grants: Grant[];
}

export interface ModuleState {
  module_id: ModuleId;
  enabled: boolean;
}

/** A verdict-signing key (Ed25519, as a private JWK) and its life: current until retired,
 * published for a while after. Kept in DATA_DIR/keys with LMDB, in a table with PostgreSQL. */
export interface KeyFile {
  kid: string;
  created_at: string;
  retired_at: string | null;
  jwk: JWK;
}
