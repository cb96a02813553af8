import type { ModuleReadiness } from '../inference/index.ts';

// The engine's module readiness, published by the main thread in shared memory for every API
// worker to read synchronously. A message alone left a window: a worker answered from its own
// copy, updated only when it got round to the message, so one worker could answer
// /health/ready 200 while another still refused verify calls as module_unavailable, and a
// replacement worker served with no readiness at all (no modules: "ready" with none listed)
// until its first message came. The main thread writes here before it posts, so a worker that
// reads after any worker saw the change sees it too.
//
// Layout: Int32 [0] a sequence number (odd while the main thread writes: a seqlock), [1] the
// length of the JSON text that follows at byte 8. One writer (the main thread); readers copy
// the text and keep it only when the sequence number was even and unchanged around the copy.

const HEAD_BYTES = 8;
/** Room for the readiness of every module with its notes and errors, many times over. */
const BOARD_BYTES = 64 * 1024;
/** A reader meeting a write in progress tries again this many times, then keeps what it had. */
const READ_TRIES = 1000;

export function createReadinessBoard(): SharedArrayBuffer {
  return new SharedArrayBuffer(BOARD_BYTES);
}

/** Main thread: publish `modules` (before telling the workers by message). */
export function publishReadiness(board: SharedArrayBuffer, modules: ModuleReadiness[]): void {
  const head = new Int32Array(board, 0, 2);
  let text = new TextEncoder().encode(JSON.stringify(modules));
  // a module's error text can be long (a model's load failure): cut, never refused, so the
  // workers never keep a readiness older than the engine's
  if (text.length > board.byteLength - HEAD_BYTES) text = new TextEncoder().encode(JSON.stringify(modules.map(shortened)));
  if (text.length > board.byteLength - HEAD_BYTES) throw new Error(`module readiness too large to share (${text.length} bytes)`);
  Atomics.add(head, 0, 1);
  new Uint8Array(board, HEAD_BYTES).set(text);
  Atomics.store(head, 1, text.length);
  Atomics.add(head, 0, 1);
}

const LONGEST_TEXT = 1000;
function shortened(m: ModuleReadiness): ModuleReadiness {
  return Object.fromEntries(Object.entries(m).map(([k, v]) => [k, typeof v === 'string' && v.length > LONGEST_TEXT ? `${v.slice(0, LONGEST_TEXT)}...` : v])) as unknown as ModuleReadiness;
}

/** API worker: the readiness last published, parsed once per publication. */
export class ReadinessReader {
  private seq = 0;
  private modules: ModuleReadiness[] | null = null;
  private readonly head: Int32Array;
  private readonly bytes: Uint8Array;

  constructor(board: SharedArrayBuffer) {
    this.head = new Int32Array(board, 0, 2);
    this.bytes = new Uint8Array(board, HEAD_BYTES);
  }

  /** null until the main thread first publishes. */
  read(): ModuleReadiness[] | null {
    for (let i = 0; i < READ_TRIES; i++) {
      const before = Atomics.load(this.head, 0);
      if (before === this.seq) return this.modules;
      if (before % 2 === 1) continue;
      // slice: a copy in memory of its own, which TextDecoder accepts (a shared view it refuses)
      const text = this.bytes.slice(0, Atomics.load(this.head, 1));
      if (Atomics.load(this.head, 0) !== before) continue;
      this.modules = JSON.parse(new TextDecoder().decode(text)) as ModuleReadiness[];
      this.seq = before;
      return this.modules;
    }
    return this.modules;
  }
}
