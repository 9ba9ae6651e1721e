/**
 * Characters a terminal acts on instead of showing: C0 controls (ESC starts the sequences that move the cursor,
 * erase a line, set the title or write the clipboard: OSC 52), DEL, C1 controls (0x9B is a one-character CSI, 0x9D
 * an OSC), and the bidirectional overrides and isolates that reorder what follows ("Trojan Source"). Tab and line
 * feed are kept by `terminalText` (stacks and multi-line messages stay readable), and escaped by `terminalLine`.
 */
// eslint-disable-next-line no-control-regex -- these are the characters it escapes
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
// eslint-disable-next-line no-control-regex -- these are the characters it escapes
const CONTROLS_AND_LINES = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** One character as the escape that shows it: \n, \r, \t, else \u001b (also valid inside a JSON string). */
function escape(char: string): string {
  return NAMED[char] ?? `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/**
 * Text that reaches a terminal or a log (the CLI's output and errors, every log line of the library), with the
 * characters a terminal would act on shown as escapes: `\u001b]52;c;...\u0007` instead of a clipboard write,
 * `\r\u001b[2K` instead of a line erased. User-controlled text (queue, flow and step names, payloads, errors a
 * handler threw, unique keys) can never then change what the reader sees. Line feeds and tabs are kept.
 */
export function terminalText(text: string): string {
  return text.replace(CONTROLS, escape);
}

/** The same for text shown on one line (a table cell, a field): line feeds and tabs escaped too. */
export function terminalLine(text: string): string {
  return text.replace(CONTROLS_AND_LINES, escape);
}
