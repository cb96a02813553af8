import type { PreparedCapture } from '../../packets/index.ts';

/** The decoded crop of an ok frame; validation guarantees one, so a gap is a bug. */
export function framePixels(c: PreparedCapture, position: number): Uint8Array {
  const px = c.pixels[position];
  if (!px) throw new Error(`capture ${c.packet.capture_id}: frame ${position} has no pixels`);
  return px;
}
