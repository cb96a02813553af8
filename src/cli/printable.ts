import { Writable } from 'node:stream';

// What the CLI prints on stderr quotes text it does not control: a model graph's tensor names
// (`models import`, `models check`), a dataset's file names (`models calibrate`), a backup's
// notes, an unexpected error's message. A graph or a file name is an outside file (the
// security notes treat graphs as hostile), and a terminal runs the control sequences it is
// sent: an ESC in a tensor name could clear the operator's screen, rewrite the line saying the
// checks passed, plant a hyperlink or write the clipboard (OSC 52). So every control character
// but the newline and the tab, and the bidirectional overrides that reorder what is shown, are
// printed as \u escapes. stdout carries JSON, whose strings JSON.stringify escapes only below
// U+0020: the rest are escaped there too (main.ts), which leaves the same JSON.
const UNPRINTABLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

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
