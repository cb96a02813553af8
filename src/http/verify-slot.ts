import { messageOf, retryAfter, ServiceError } from '../errors/index.ts';
import type { Admission, AdmissionRefusal } from '../verify/index.ts';
import type { ReceivedPart } from './multipart/index.ts';
import type { AdmissionSlot } from './capacity.ts';
import type { HttpContext } from './context.ts';
import type { Services } from './services.ts';

/** The verify slot of one call, as the use case's admission port: the slot may be revoked
 * while the body is still arriving, in favour of a caller below its fair share
 * (src/http/capacity.ts). A revoked upload is ended at once (503 server_busy with
 * Retry-After, nothing charged: nothing is reserved before the body is complete); one whose
 * last byte arrived just as its slot was revoked is refused the same way. */
export class CallSlot implements Admission {
  private slot: AdmissionSlot | null = null;
  private refused = false;

  constructor(
    private readonly ctx: HttpContext,
    private readonly s: Pick<Services, 'admission' | 'uploadPacer' | 'metrics' | 'config'>,
  ) {}

  tryAcquire(address: string, tokenId: string): (() => void) | AdmissionRefusal {
    const slot = this.s.admission.acquire(address, tokenId, () => this.revoked());
    if (typeof slot === 'string') return slot;
    this.slot = slot;
    return () => slot.release();
  }

  /** The call's upload: complete only if the slot is still the call's when the last byte is in. */
  upload(parts: Promise<ReceivedPart[]>): Promise<ReceivedPart[]> {
    return parts.then((received) => {
      if (this.slot === null || this.slot.uploaded()) return received;
      for (const part of received) part.release?.();
      throw this.busy();
    });
  }

  private revoked(): void {
    // not paced: the body is complete and upload() refuses the call
    this.s.uploadPacer.end(this.ctx.res, this.busy());
  }

  private busy(): ServiceError {
    if (!this.refused) {
      this.refused = true;
      this.s.metrics.busyRejections.inc();
    }
    return new ServiceError('server_busy', messageOf('server_busy', 'revoked'), retryAfter(this.s.config.RETRY_AFTER_SECONDS));
  }
}
