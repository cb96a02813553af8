import { archiveDemoUpload } from '../metering/index.ts';
import type { ReserveInput, ReserveOutcome, StoreBackend } from '../store/backend.ts';
import type { Reservation, UsageRecord } from '../store/records.ts';

/** The verify call's only way into metering: every reserve, settle and refund of a verify
 * call goes through here, so a change of store touches one place. */
export interface Metering {
  reserve(input: ReserveInput): Promise<ReserveOutcome>;
  /** `render` builds the answer from the usage snapshot taken inside the settlement */
  settle(reservation: Reservation, at: number, render: (usage: UsageRecord[]) => string, results: unknown): Promise<string>;
  refund(reservationId: string, at: number): Promise<unknown>;
  archiveDemoUpload(dataDir: string, at: number, requestId: string, metadataText: string, files: { name: string; bytes: Uint8Array }[]): Promise<unknown>;
}

export function storeMetering(store: StoreBackend): Metering {
  return {
    reserve: (input) => store.reserve(input),
    settle: (reservation, at, render, results) => store.settle(reservation, at, render, results),
    refund: (id, at) => store.refund(id, at),
    archiveDemoUpload: (dataDir, at, requestId, metadataText, files) => archiveDemoUpload(dataDir, at, requestId, metadataText, files),
  };
}
