// Readiness as an event. Whatever readiness derives from (the pool, each worker's warm report,
// a module's load error, the provider and its fallback note, the set being served) changes in
// a few places; each calls check() right after, and listeners hear only a real change. The
// main thread pushes that to the API workers, so /health/ready follows a warm-up, a failure or
// a switch at once, with no timer polling the engine.
import type { ModuleReadiness } from './types.ts';

export type ReadinessListener = (modules: ModuleReadiness[]) => void;

export class ReadinessEvents {
  private readonly listeners = new Set<ReadinessListener>();
  /** what listeners last heard, or what there was when the first of them subscribed */
  private last = '';

  constructor(private readonly read: () => ModuleReadiness[]) {}

  /** `listener` hears each change after this call; the caller reads the present state itself.
   * Returns the unsubscribe function. */
  listen(listener: ReadinessListener): () => void {
    // with nobody listening check() skips its work, so what was last heard may be stale
    if (this.listeners.size === 0) this.last = JSON.stringify(this.read());
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Called wherever readiness may have changed: tells the listeners when it did. */
  check(): void {
    if (this.listeners.size === 0) return;
    const modules = this.read();
    const text = JSON.stringify(modules);
    if (text === this.last) return;
    this.last = text;
    for (const listener of this.listeners) listener(modules);
  }
}
