import { archiveDemoUpload, refund, reserve, settle, type Reservation, type ReserveInput, type ReserveOutcome, type UsageRecord } from '../metering/index.ts';
import type { Store } from '../store/open.ts';

/** The verify call's only way into metering: every reserve, settle and refund of a verify
 * call goes through here, so a change of store touches one place. */
export interface Metering {
  reserve(input: ReserveInput): Promise<ReserveOutcome>;
  /** `render` builds the answer from the usage snapshot taken inside the settlement */
  settle(reservation: Reservation, at: number, render: (usage: UsageRecord[]) => string, results: unknown): Promise<string>;
  refund(reservationId: string, at: number): Promise<unknown>;
  archiveDemoUpload(dataDir: string, at: number, requestId: string, metadataText: string, files: { name: string; bytes: Uint8Array }[]): Promise<unknown>;
}

export function storeMetering(store: Store): Metering {
  return {
    reserve: (input) => reserve(store, input),
    settle: (reservation, at, render, results) => settle(store, reservation, at, render, results),
    refund: (id, at) => refund(store, id, at),
    archiveDemoUpload: (dataDir, at, requestId, metadataText, files) => archiveDemoUpload(dataDir, at, requestId, metadataText, files),
  };
}
