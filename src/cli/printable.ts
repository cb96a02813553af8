import { Writable } from 'node:stream';
import { printable } from '../printable.ts';

// What the CLI prints on stderr quotes text it does not control: a model graph's tensor names
// (`models import`, `models check`), a dataset's file names (`models calibrate`), a backup's
// notes, an unexpected error's message. A graph or a file name is an outside file (the
// security notes treat graphs as hostile), so every write is made printable (src/printable.ts
// says what that escapes and why). stdout carries JSON, whose strings JSON.stringify escapes
// only below U+0020: the rest are escaped there too (main.ts), which leaves the same JSON.
export { printable };

/** `out`, with every write made printable. Writes pass through synchronously, in order. A
 * terminal's readline given this stream (models import's questions) asks in plain lines. */
export function printableStream(out: NodeJS.WritableStream): NodeJS.WritableStream {
  return new Writable({
    decodeStrings: false,
    write(chunk: string | Buffer, _enc, done) {
      out.write(printable(typeof chunk === 'string' ? chunk : chunk.toString('utf8')));
      done();
    },
  });
}
