// JSON in and out without changing a number. JSON.parse turns every number into a double, so an
// int64 above 2^53 (a CRD's counter, a printed column) would come back rounded. Here a number
// token with more than 15 significant digits is replaced, before JSON.parse, by a string that
// carries its exact text behind a per-process marker, and the marker is turned back into the
// bare token after JSON.stringify. Everything else is the engine's own JSON (fast). Node 20 has
// neither JSON.rawJSON nor the reviver's source text, which would otherwise do this.
import { randomBytes } from 'node:crypto';

const NONCE = `kubexa-number-${randomBytes(8).toString('hex')}:`;
/** Unguessable, so a string in the input can never be mistaken for a kept number. */
const MARKER = `\u0000${NONCE}`;
/** The marker as JSON text writes it (a NUL must be escaped there). */
const MARKER_JSON = `\\u0000${NONCE}`;

/** Any digit run long enough to be unsafe; cheap pre-check before tokenizing. */
const LONG_DIGITS = /\d{16}/;
/**
 * A string token, or a number token with at least 16 digits before any fraction or exponent (the
 * look-behind keeps a long fraction or exponent from matching on its own: those are doubles in
 * the API server too).
 */
const TOKENS = /"(?:[^"\\]|\\.)*"|(?<![\d.eE+-])-?\d{16,}(?:\.\d+)?(?:[eE][+-]?\d+)?/g;
const MARKED = new RegExp(`"\\\\u0000${NONCE}(-?[0-9][0-9.eE+-]*)"`, 'g');

/** Parses JSON text; long numbers become marked strings that stringifyLossless restores. */
export function parseLossless(text: string): unknown {
  if (!LONG_DIGITS.test(text)) return JSON.parse(text);
  const marked = text.replace(TOKENS, (token) =>
    token.startsWith('"') ? token : `"${MARKER_JSON}${token}"`,
  );
  return JSON.parse(marked);
}

/** JSON.stringify, with every kept number written back exactly as it arrived. */
export function stringifyLossless(value: unknown): string {
  const text = JSON.stringify(value);
  if (!text.includes(NONCE)) return text;
  return text.replace(MARKED, (_, digits: string) => digits);
}

/** The exact text of a kept number, or undefined for any other value. */
export function keptNumberText(value: unknown): string | undefined {
  return typeof value === 'string' && value.startsWith(MARKER)
    ? value.slice(MARKER.length)
    : undefined;
}
