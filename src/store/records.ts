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
