import type { Database, Key } from 'lmdb';
import { atomically } from './atomic.ts';
import type { ReserveInput, ReserveOutcome } from '../backend.ts';
import {
  ACTIVE_SESSIONS_LISTED, deviceSessionUsable, MAX_SESSION_TTL_SECONDS, mintRefusal, sessionReservationRefusal,
  type DeviceSession, type DeviceSessionCall, type MintLimit, type MintOutcome,
} from '../device-sessions.ts';
import { readLatest, type Store } from './open.ts';
import { noteExpiry, pruneExpired } from './expiry.ts';
import type { Reservation } from '../records.ts';

// Device sessions in LMDB, two tables with typed keys:
//   deviceSessions      ['id', id] -> DeviceSession, ['hash', hash] -> id,
//                       ['tok', token_id, created_ms, id] -> id (mint rate, the console's list)
//   deviceSessionCalls  ['s', session_id, n, reservation_id] -> DeviceSessionCall (n: the call's
//                       place among the session's, so calls of one millisecond keep their order),
//                       ['r', reservation_id] -> its ['s', ...] key (found again on refund)
// `void` on a write inside atomically(): part of the transaction, whose commit it reports.

const byToken = (tokenId: string, ms: number, id = '') => ['tok', tokenId, ms, id];

export function getDeviceSession(store: Store, id: string): DeviceSession | undefined {
  readLatest(store);
  return store.db.deviceSessions.get(['id', id]) as DeviceSession | undefined;
}

/** Reads the latest commit: a session minted on another worker a moment ago must work at once. */
export function getDeviceSessionByHash(store: Store, hash: string): DeviceSession | undefined {
  readLatest(store);
  const id = store.db.deviceSessions.get(['hash', hash]) as string | undefined;
  return id === undefined ? undefined : (store.db.deviceSessions.get(['id', id]) as DeviceSession | undefined);
}

/** The rate check and the insert in one write transaction: writers are serialised, so two
 * concurrent mints cannot both take the last place in the window. */
export function createDeviceSession(store: Store, session: DeviceSession, limit: MintLimit, at: number): Promise<MintOutcome> {
  const db = store.db.deviceSessions;
  return atomically(store, (): MintOutcome => {
    const recent: number[] = [];
    for (const { key } of db.getRange({ start: byToken(session.token_id, at - limit.windowMs), end: byToken(session.token_id, Number.MAX_SAFE_INTEGER) })) {
      recent.push((key as [string, string, number, string])[2]);
    }
    const refused = mintRefusal(recent, limit, at);
    if (refused) return refused;
    void db.put(['id', session.id], session);
    noteExpiry(store, 'deviceSessions', session.expires_at, ['id', session.id]);
    void db.put(['hash', session.hash], session.id);
    void db.put(byToken(session.token_id, Date.parse(session.created_at), session.id), session.id);
    return { kind: 'created', session };
  }, 'device_session');
}

export function revokeDeviceSession(store: Store, id: string, at: number): Promise<DeviceSession | undefined> {
  const db = store.db.deviceSessions;
  return atomically(store, () => {
    const s = db.get(['id', id]) as DeviceSession | undefined;
    if (!s || s.revoked_at !== null) return s;
    const next = { ...s, revoked_at: new Date(at).toISOString() };
    void db.put(['id', id], next);
    return next;
  }, 'device_session');
}

export function listDeviceSessionCalls(store: Store, id: string): DeviceSessionCall[] {
  readLatest(store);
  return [...store.db.deviceSessionCalls.getRange({ start: ['s', id], end: ['s', `${id}\u0000`] })].map((e) => e.value as DeviceSessionCall);
}

/** Newest first; only sessions minted within the longest possible lifetime can be active. */
export function listActiveDeviceSessions(store: Store, tokenId: string, at: number): DeviceSession[] {
  readLatest(store);
  const db = store.db.deviceSessions;
  const out: DeviceSession[] = [];
  const range = db.getRange({ start: byToken(tokenId, Number.MAX_SAFE_INTEGER), end: byToken(tokenId, at - MAX_SESSION_TTL_SECONDS * 1000), reverse: true });
  for (const { value } of range) {
    const s = db.get(['id', value as string]) as DeviceSession | undefined;
    if (s && deviceSessionUsable(s, at)) out.push(s);
    if (out.length === ACTIVE_SESSIONS_LISTED) break;
  }
  return out;
}

/** Sessions expired before `cutoff` go with their calls: found through the expiry index and
 * removed in short batches (expiry.ts), so the write lock is never held long. */
export function pruneDeviceSessionsBefore(store: Store, cutoff: number): Promise<number> {
  const sessions = store.db.deviceSessions;
  const calls = store.db.deviceSessionCalls;
  return pruneExpired(store, 'deviceSessions', sessions as Database<DeviceSession, Key>, cutoff, {
    // a store not indexed yet: its sessions, not their other keys
    range: { start: ['id'], end: ['id\u0000'] },
    op: 'device_session',
    remove: (_key, value) => {
      const s = value as DeviceSession;
      for (const { key, value: call } of calls.getRange({ start: ['s', s.id], end: ['s', `${s.id}\u0000`] })) {
        void calls.remove(['r', (call as DeviceSessionCall).reservation_id]);
        void calls.remove(key);
      }
      void sessions.remove(byToken(s.token_id, Date.parse(s.created_at), s.id));
      void sessions.remove(['hash', s.hash]);
      void sessions.remove(['id', s.id]);
    },
  });
}

// Inside the reservation's transaction (reserve.ts) and the refund's (settle.ts):

/** The call's session (none without one), read once in the reservation's transaction and
 * judged twice: dead (revoked, expired, not its token's) before the key is looked up, so no
 * replay answers a dead session; its captures where the quota is, once the call would
 * otherwise be admitted, so a used-up session still replays. */
export function sessionOf(store: Store, input: ReserveInput): {
  dead: boolean;
  refusal(units: number): Extract<ReserveOutcome, { kind: 'invalid_session_token' | 'session_captures_exceeded' }> | null;
} {
  if (!input.sessionId) return { dead: false, refusal: () => null };
  const s = store.db.deviceSessions.get(['id', input.sessionId]) as DeviceSession | undefined;
  return {
    dead: sessionReservationRefusal(s, input.token.id, 0, input.at) === 'invalid_session_token',
    refusal(units) {
      const code = sessionReservationRefusal(s, input.token.id, units, input.at);
      if (code === 'session_captures_exceeded') {
        return { kind: code, message: `The request has ${units} captures and the session has ${s!.max_captures - s!.captures_used} of ${s!.max_captures} left; nothing was charged` };
      }
      return code === null ? null : { kind: code };
    },
  };
}

/** Counts the admitted call's captures on its session and records the call. */
export function bookSessionCall(store: Store, input: ReserveInput, reservation: Reservation): void {
  if (!input.sessionId) return;
  const s = store.db.deviceSessions.get(['id', input.sessionId]) as DeviceSession;
  void store.db.deviceSessions.put(['id', s.id], { ...s, captures_used: s.captures_used + reservation.units });
  // inside the write transaction, so no other call of this session takes the same place
  const n = store.db.deviceSessionCalls.getCount({ start: ['s', s.id], end: ['s', `${s.id}\u0000`] });
  const key = ['s', s.id, n, reservation.id];
  const call: DeviceSessionCall = { request_id: reservation.request_id, reservation_id: reservation.id, units: reservation.units, at: reservation.created_at, refunded: false };
  void store.db.deviceSessionCalls.put(key, call);
  void store.db.deviceSessionCalls.put(['r', reservation.id], key);
}

/** A refunded reservation's captures go back to its session, so the device may retry. */
export function releaseSessionCall(store: Store, reservationId: string): void {
  const key = store.db.deviceSessionCalls.get(['r', reservationId]) as Key[] | undefined;
  if (!key) return;
  const call = store.db.deviceSessionCalls.get(key) as DeviceSessionCall | undefined;
  if (!call || call.refunded) return;
  void store.db.deviceSessionCalls.put(key, { ...call, refunded: true });
  const s = store.db.deviceSessions.get(['id', key[1] as string]) as DeviceSession | undefined;
  if (s) void store.db.deviceSessions.put(['id', s.id], { ...s, captures_used: Math.max(0, s.captures_used - call.units) });
}
