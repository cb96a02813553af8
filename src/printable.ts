// Text the service does not control, made safe to show: every control character but the
// newline and the tab (C0, DEL, C1 such as U+009B, the terminal's CSI, and U+0085, a line
// break to some readers, as are U+2028 and U+2029), and the bidirectional marks, overrides and
// isolates that reorder what is shown (U+202E, U+2066 ...), become \uXXXX escapes. A terminal
// runs the control sequences it is sent (clear the screen, rewrite a line, plant a hyperlink,
// write the clipboard), and a reordered line can show "nimda" as "admin". In a JSON text every such
// character can only stand inside a string, where \uXXXX is the same character: escaping a
// whole JSON text leaves the same JSON. Used by the CLI (src/cli/printable.ts) and for every
// log line (src/observability/logger.ts).
const UNPRINTABLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
