import type { ModuleId } from '../contract/index.ts';
import { stampedAhead } from './throttle-rules.ts';

// Device sessions (issue 26): short-lived tokens a backend mints with its business token, so a
// phone or kiosk never holds the business token. The rules both stores apply are here; each
// store keeps the records its own way (lmdb/device-sessions.ts, pg/device-sessions.ts).

/** A minted session. Only the SHA-256 of its `lvs_` plaintext is kept. */
export interface DeviceSession {
  /** ses_..., what the backend reads and revokes it by */
  id: string;
  /** hex SHA-256 of the plaintext session token */
  hash: string;
  /** the business token that minted it: charged for its captures, and the only reader */
  token_id: string;
  module_id: ModuleId;
  created_at: string;
  /** never past the parent token's expiry at minting */
  expires_at: string;
  max_captures: number;
  /** units of the reservations made with it, less those refunded */
  captures_used: number;
  revoked_at: string | null;
}

/** One verify call made with a session, recorded in the reservation's transaction. */
export interface DeviceSessionCall {
  request_id: string;
  reservation_id: string;
  units: number;
  at: string;
  /** the reservation's units were given back (inference failed, crash recovery, operator) */
  refunded: boolean;
}

export type DeviceSessionState = 'active' | 'expired' | 'exhausted' | 'revoked';

/** Revoked first (an operator or backend acted), then expired, then exhausted. */
export function deviceSessionState(s: DeviceSession, at: number): DeviceSessionState {
  if (s.revoked_at !== null) return 'revoked';
  if (Date.parse(s.expires_at) <= at) return 'expired';
  if (s.captures_used >= s.max_captures) return 'exhausted';
  return 'active';
}

/** Whether the session token still authenticates (an exhausted one does: its replays and
 * GET /v1/me still answer, and a new verify hears 429 session_captures_exceeded). */
export function deviceSessionUsable(s: DeviceSession, at: number): boolean {
  return s.revoked_at === null && Date.parse(s.expires_at) > at;
}

/** Minting allowed per parent token: at most `limit` sessions created in any `windowMs`. */
export interface MintLimit {
  limit: number;
  windowMs: number;
}

export type MintOutcome =
  | { kind: 'created'; session: DeviceSession }
  | { kind: 'rate_limited'; retryAfterSeconds: number };

/** The sliding-window rule on the creation times (ms) of the parent's recent sessions: the
 * wait is until enough of them have left the window for one more. */
export function mintRefusal(recentCreatedMs: number[], limit: MintLimit, at: number): MintOutcome | null {
  // a mint stamped more than a window ahead is forgotten, one a little ahead counts (throttle-
  // rules.ts stampedAhead says why)
  const inWindow = recentCreatedMs.filter((ms) => ms > at - limit.windowMs && !stampedAhead(ms, at, limit.windowMs)).sort((a, b) => a - b);
  if (inWindow.length < limit.limit) return null;
  const leaves = inWindow[inWindow.length - limit.limit]! + limit.windowMs;
  return { kind: 'rate_limited', retryAfterSeconds: Math.max(1, Math.ceil((leaves - at) / 1000)) };
}

/** Why a reservation made with a session is refused, or null: the session must be usable and
 * the call's captures must fit in what it has left (the whole call, or nothing). */
export function sessionReservationRefusal(s: DeviceSession | undefined, tokenId: string, units: number, at: number): 'invalid_session_token' | 'session_captures_exceeded' | null {
  if (!s || s.token_id !== tokenId || !deviceSessionUsable(s, at)) return 'invalid_session_token';
  if (s.captures_used + units > s.max_captures) return 'session_captures_exceeded';
  return null;
}

/** Hard bounds of what a mint may ask for (the configured limits lie within them): a session
 * older than this many seconds can no longer be active, which bounds the scans for them. */
export const MAX_SESSION_TTL_SECONDS = 86_400;
export const MAX_SESSION_CAPTURES = 10_000;
/** the console lists at most this many of a token's active sessions, newest first */
export const ACTIVE_SESSIONS_LISTED = 100;
