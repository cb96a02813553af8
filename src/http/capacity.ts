/** Verify capacity of one API worker (spec Limits: 2 concurrent calls per API worker). A slot
 * is taken before the body is read and held through upload, preparation and inference;
 * when none is free the call is refused at once (503), never queued. */
export class CapacitySlots {
  private used = 0;

  constructor(readonly size: number, private readonly onChange?: (inUse: number) => void) {}

  inUse(): number {
    return this.used;
  }

  /** Returns an idempotent release function, or null when every slot is taken. */
  tryAcquire(): (() => void) | null {
    if (this.used >= this.size) return null;
    this.used++;
    this.onChange?.(this.used);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.used--;
      this.onChange?.(this.used);
    };
  }
}
