// A rejected image: `type` is the 422 item type (png_invalid_crc, rgb8_wrong_size, ...),
// `ctx` the numbers a client needs to see what was wrong.

/** Not a catalogue error on its own: one item of a 422 `detail` list, which the packet checks
 * collect and answer together as invalid_input. */
export class ImageError extends Error {
  readonly type: string;
  readonly ctx: Record<string, unknown> | undefined;
  constructor(type: string, message: string, ctx?: Record<string, unknown>) {
    super(message);
    this.name = 'ImageError';
    this.type = type;
    this.ctx = ctx;
  }
}
