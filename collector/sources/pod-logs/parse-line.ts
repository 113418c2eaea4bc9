// One line of `pods/log?timestamps=true` -> timestamp, payload, message and level.
import type { LogLevel } from '../../../proto/index.js';
import { levelFromText, levelFromValue } from './level.js';
import { parseLineTimeAt, type LineTime } from './line-time.js';
import { truncateUtf8 } from './truncate.js';

/** A parsed line, before multi-line joining. */
export interface ParsedLine {
  /** The runtime's timestamp; undefined when the line has no RFC3339 prefix. */
  readonly time: LineTime | undefined;
  /** The application's own text (prefix stripped), whitespace kept. */
  readonly raw: string;
  /** `msg`/`message` of a JSON line, otherwise the raw text. */
  readonly message: string;
  readonly level: LogLevel;
  /** True for a JSON object line: such a line is never joined with another. */
  readonly isJson: boolean;
  readonly truncated: boolean;
}

const MIN_PREFIXED_LENGTH = 20;

/**
 * Parses one line (without its newline). `maxLineBytes` cuts the payload on a UTF-8 boundary;
 * `cut` says the reader already dropped bytes past its transport cap.
 */
export function parseLine(line: string, maxLineBytes: number, cut = false): ParsedLine {
  const full = withoutCr(line);
  // The prefix is split off here, with no intermediate object: this runs once per line.
  const space = full.indexOf(' ');
  const time = prefixTime(full, space);
  const text = time ? full.slice(space + 1) : full;
  let raw = text;
  let truncated = cut;
  // Most lines fit at 3 bytes per UTF-16 unit: no byte count and no result object for those.
  if (maxLineBytes > 0 && text.length * 3 > maxLineBytes) {
    const limited = truncateUtf8(text, maxLineBytes);
    raw = limited.text;
    truncated = limited.truncated || cut;
  }
  if (isJsonCandidate(raw) && !truncated) {
    const json = parseJsonObject(raw);
    if (json) {
      return {
        time,
        raw,
        message: jsonMessage(json) ?? raw,
        level: levelFromValue(json['level'] ?? json['lvl'] ?? json['severity']),
        isJson: true,
        truncated,
      };
    }
  }
  return {
    time,
    raw,
    message: raw,
    level: levelFromText(raw),
    isJson: isJsonCandidate(raw),
    truncated,
  };
}

function withoutCr(line: string): string {
  return line.endsWith('\r') ? line.slice(0, -1) : line;
}

/** The RFC3339 prefix ending at `space`; undefined when the line has none. */
function prefixTime(text: string, space: number): LineTime | undefined {
  const first = text.charCodeAt(0);
  if (space < MIN_PREFIXED_LENGTH || first < 48 || first > 57) return undefined;
  return parseLineTimeAt(text, space);
}

function isJsonCandidate(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 32 || c === 9) continue;
    return c === 123; // '{'
  }
  return false;
}

function parseJsonObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
      return value as Record<string, unknown>;
    }
  } catch {
    // Not JSON after all: the line is text that starts with a brace.
  }
  return undefined;
}

function jsonMessage(json: Record<string, unknown>): string | undefined {
  for (const key of ['msg', 'message']) {
    const value = json[key];
    if (typeof value === 'string' && value !== '') return value;
  }
  return undefined;
}
