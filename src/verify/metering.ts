import { archiveDemoUpload } from '../metering/index.ts';
import { type ReserveInput, type MeteringStore, type StoreStatus, type Reservation, type RenderAnswer, isStorageFailure } from '../store/index.ts';
import { admittedOrThrow, settledOrThrow, UnrecordedCallError, type Admitted } from './store-outcomes.ts';

/** The verify call's only way into metering: every reserve, settle and refund of a verify
 * call goes through here, so a change of store touches one place. */
export interface Metering {
  /** the store is failing writes (a full disk): new calls are refused before their upload */
  writesFailing?(): boolean;
  /** a reservation the store could not write rejects with 503 store_unavailable: nothing
   * was written, nothing charged, the key not bound; a refusal rejects with its catalogue
   * error (`retryAfterSeconds`: the wait a request still in progress is told) */
  reserve(input: ReserveInput & { retryAfterSeconds: number }): Promise<Admitted>;
  /** `render` builds the answer from the usage snapshot taken inside the settlement */
  settle(reservation: Reservation, at: number, render: RenderAnswer, results: unknown): Promise<string>;
  /** a refund the store could not write is owed (store.writes runs it once writes work) and
   * rejects with 503 store_unavailable saying so */
  refund(reservationId: string, at: number): Promise<unknown>;
  archiveDemoUpload(dataDir: string, at: number, requestId: string, metadataText: string, files: { name: string; bytes: Uint8Array }[]): Promise<unknown>;
}

export function storeMetering(store: MeteringStore & Pick<StoreStatus, 'writes'>): Metering {
  return {
    writesFailing: () => {
      store.writes.watchSpace();
      return store.writes.failing() !== null;
    },
    reserve: ({ retryAfterSeconds, ...input }) => store.reserve(input).then(
      (outcome) => admittedOrThrow(
        // the parent revoked, disabled or expired during the upload: to the device holding the
        // session, it is its session that no longer works
        input.sessionId && outcome.kind === 'invalid_token' ? { kind: 'invalid_session_token' } : outcome,
        retryAfterSeconds,
      ),
      (err: unknown) => {
        if (isStorageFailure(err)) throw new UnrecordedCallError('nothing_written', err);
        throw err;
      },
    ),
    settle: (reservation, at, render, results) => store.settle(reservation, at, render, results).then(settledOrThrow),
    refund: (id, at) => store.refund(id, at).catch((err: unknown) => {
      if (!isStorageFailure(err)) throw err;
      store.writes.deferRepair(`refund:${id}`, () => store.refund(id, Date.now()));
      throw new UnrecordedCallError('refund_deferred', err);
    }),
    archiveDemoUpload: (dataDir, at, requestId, metadataText, files) => archiveDemoUpload(dataDir, at, requestId, metadataText, files),
  };
}
