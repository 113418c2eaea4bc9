// A parser for the Prometheus text exposition format (0.0.4) and OpenMetrics 1.0 text, written
// for this collector (the npm parsers we found are unmaintained or regex-per-line slow) and
// tested against the formats' edge cases in exposition.test.ts: escapes in label values and
// HELP, NaN and ±Inf, timestamps (milliseconds in the text format, seconds in OpenMetrics),
// histograms, summaries, OpenMetrics `_total`/`_created`/`# EOF`, exemplars (skipped), and
// quoted UTF-8 metric names. A malformed line fails the whole scrape with its line number, as
// Prometheus does: half a page is worse than none.

export type FamilyType =
  | 'counter'
  | 'gauge'
  | 'histogram'
  | 'gaugehistogram'
  | 'summary'
  | 'info'
  | 'stateset'
  | 'untyped'
  | 'unknown';

export interface Sample {
  /** The sample's own name (e.g. `http_requests_total`, `latency_bucket`). */
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
  /** Unix milliseconds, when the exposition gave one. */
  readonly timestampMs?: number;
}

export interface Family {
  readonly name: string;
  help: string;
  type: FamilyType;
  readonly samples: Sample[];
}

export type ExpositionFormat = 'text' | 'openmetrics';

export class ExpositionError extends Error {
  readonly line: number;
  constructor(line: number, message: string) {
    super(`line ${String(line)}: ${message}`);
    this.name = 'ExpositionError';
    this.line = line;
  }
}

const TYPES = new Set<string>([
  'counter',
  'gauge',
  'histogram',
  'gaugehistogram',
  'summary',
  'info',
  'stateset',
  'untyped',
  'unknown',
]);

/** Sample-name suffixes that belong to a family of the given type. */
const SUFFIXES: Readonly<Record<string, readonly string[]>> = {
  counter: ['_total', '_created'],
  histogram: ['_bucket', '_sum', '_count', '_created'],
  gaugehistogram: ['_bucket', '_gsum', '_gcount'],
  summary: ['_sum', '_count', '_created'],
  info: ['_info'],
};

/** [a-zA-Z_:] by char code: this runs for every character of every sample name. */
function isNameStart(code: number): boolean {
  return (code >= 97 && code <= 122) || (code >= 65 && code <= 90) || code === 95 || code === 58;
}
function isNameChar(code: number): boolean {
  return isNameStart(code) || (code >= 48 && code <= 57);
}

/** Whether the Content-Type of a response names OpenMetrics. */
export function formatOf(contentType: string | undefined): ExpositionFormat {
  return /application\/openmetrics-text/i.test(contentType ?? '') ? 'openmetrics' : 'text';
}

/** Parses a whole exposition. Families come in the order they first appear. */
export function parseExposition(body: string, format: ExpositionFormat = 'text'): Family[] {
  const parser = new ExpositionParser(format);
  let start = 0;
  const length = body.length;
  while (start < length) {
    let end = body.indexOf('\n', start);
    if (end === -1) end = length;
    const cut = body.charCodeAt(end - 1) === 13 ? end - 1 : end;
    parser.line(body.slice(start, cut), end + 1 < length);
    start = end + 1;
  }
  return parser.finish();
}

const META = /^#\s+(HELP|TYPE|UNIT)\s+(\S+)(?:\s(.*))?$/;
const BLANK = /^\s*$/;

class ExpositionParser {
  readonly #format: ExpositionFormat;
  readonly #families = new Map<string, Family>();
  /** The family the last line belonged to: its samples may follow. */
  #current: Family | undefined;
  #lineNumber = 0;
  #sawEof = false;

  constructor(format: ExpositionFormat) {
    this.#format = format;
  }

  line(line: string, more: boolean): void {
    this.#lineNumber++;
    if (this.#sawEof) {
      if (!BLANK.test(line)) this.#fail('content after # EOF');
      return;
    }
    if (BLANK.test(line)) {
      if (this.#format === 'openmetrics' && line === '' && more) {
        this.#fail('empty line (not allowed in OpenMetrics)');
      }
      return;
    }
    const trimmed = line.trimStart();
    if (trimmed.startsWith('#')) this.#comment(trimmed);
    else this.#sample(parseSample(line, this.#lineNumber, this.#format));
  }

  finish(): Family[] {
    if (this.#format === 'openmetrics' && !this.#sawEof) {
      this.#fail('OpenMetrics exposition without # EOF (truncated?)');
    }
    return [...this.#families.values()];
  }

  #fail(message: string): never {
    throw new ExpositionError(this.#lineNumber, message);
  }

  #comment(comment: string): void {
    if (this.#format === 'openmetrics' && comment === '# EOF') {
      this.#sawEof = true;
      return;
    }
    const meta = META.exec(comment);
    if (meta === null) return; // a plain comment
    const [, keyword = '', rawName = '', rest = ''] = meta;
    const name = rawName.startsWith('"') ? unquote(rawName, this.#lineNumber) : rawName;
    if (!rawName.startsWith('"')) checkName(name, this.#lineNumber);
    const family = this.#familyForMeta(name, keyword);
    if (keyword === 'HELP') family.help = unescapeHelp(rest, this.#lineNumber);
    else if (keyword === 'TYPE') this.#setType(family, rest.trim().toLowerCase());
    this.#current = family;
  }

  #familyForMeta(name: string, keyword: string): Family {
    const family = this.#families.get(name);
    if (family === undefined) {
      const created: Family = { name, help: '', type: 'untyped', samples: [] };
      this.#families.set(name, created);
      return created;
    }
    if (family.samples.length > 0 && family !== this.#current && keyword !== 'UNIT') {
      this.#fail(`${keyword} for ${name} after its samples`);
    }
    return family;
  }

  #setType(family: Family, type: string): void {
    if (!TYPES.has(type)) this.#fail(`unknown type "${type}"`);
    if (family.samples.length > 0) this.#fail(`TYPE for ${family.name} after its samples`);
    family.type = type as FamilyType;
  }

  #sample(sample: Sample): void {
    const current = this.#current;
    let family = current !== undefined && belongsTo(sample.name, current) ? current : undefined;
    if (family === undefined) {
      family = this.#families.get(sample.name) ?? familyBySuffix(this.#families, sample.name);
      if (family === undefined) {
        family = { name: sample.name, help: '', type: 'untyped', samples: [] };
        this.#families.set(sample.name, family);
      }
      this.#current = family;
    }
    family.samples.push(sample);
  }
}

function belongsTo(sampleName: string, family: Family): boolean {
  if (sampleName === family.name) return true;
  const suffixes = SUFFIXES[family.type];
  if (suffixes === undefined) return false;
  return suffixes.some((suffix) => sampleName === family.name + suffix);
}

function familyBySuffix(families: Map<string, Family>, sampleName: string): Family | undefined {
  for (const suffix of [
    '_bucket',
    '_sum',
    '_count',
    '_total',
    '_created',
    '_gsum',
    '_gcount',
    '_info',
  ]) {
    if (!sampleName.endsWith(suffix)) continue;
    const family = families.get(sampleName.slice(0, -suffix.length));
    if (family !== undefined && belongsTo(sampleName, family)) return family;
  }
  return undefined;
}

function checkName(name: string, line: number): void {
  let valid = name !== '' && isNameStart(name.charCodeAt(0));
  for (let i = 1; valid && i < name.length; i++) valid = isNameChar(name.charCodeAt(i));
  if (!valid) {
    throw new ExpositionError(line, `invalid metric name "${name}"`);
  }
}

function unescapeHelp(text: string, line: number): string {
  // HELP escapes only \\ and \n in the text format; OpenMetrics adds \".
  return text.replace(/\\(.?)/g, (_, c: string) => {
    if (c === 'n') return '\n';
    if (c === '\\') return '\\';
    if (c === '"') return '"';
    if (c === '') throw new ExpositionError(line, 'HELP ends with a lone backslash');
    return `\\${c}`;
  });
}

function unquote(text: string, line: number): string {
  if (text.length < 2 || !text.endsWith('"'))
    throw new ExpositionError(line, 'unterminated quoted name');
  return unescapeLabel(text.slice(1, -1), line);
}

const LABEL_ESCAPES: Readonly<Record<string, string>> = { n: '\n', '\\': '\\', '"': '"' };

function unescapeLabel(text: string, line: number): string {
  if (!text.includes('\\')) return text;
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text.charAt(i);
    if (c !== '\\') {
      out += c;
      continue;
    }
    const next = text[++i];
    const replacement = next === undefined ? undefined : LABEL_ESCAPES[next];
    if (replacement === undefined) {
      throw new ExpositionError(line, `invalid escape \\${next ?? ''} in a label value`);
    }
    out += replacement;
  }
  return out;
}

/** A cursor over one sample line. */
class Cursor {
  i = 0;
  readonly text: string;
  readonly line: number;
  constructor(text: string, line: number) {
    this.text = text;
    this.line = line;
  }
  fail(message: string): never {
    throw new ExpositionError(this.line, `${message} (at column ${String(this.i + 1)})`);
  }
  peek(): string | undefined {
    return this.text[this.i];
  }
  skipSpace(): void {
    while (this.text[this.i] === ' ' || this.text[this.i] === '\t') this.i++;
  }
  name(): string {
    const from = this.i;
    if (!isNameStart(this.text.charCodeAt(this.i))) this.fail('expected a name');
    this.i++;
    while (isNameChar(this.text.charCodeAt(this.i))) this.i++;
    return this.text.slice(from, this.i);
  }
  quoted(): string {
    if (this.text[this.i] !== '"') this.fail('expected "');
    const from = ++this.i;
    for (;;) {
      const c = this.text[this.i];
      if (c === undefined) this.fail('unterminated quoted string');
      if (c === '\\') {
        this.i += 2;
        continue;
      }
      if (c === '"') break;
      this.i++;
    }
    const raw = this.text.slice(from, this.i);
    this.i++;
    return unescapeLabel(raw, this.line);
  }
  token(): string {
    const from = this.i;
    while (this.i < this.text.length && this.text[this.i] !== ' ' && this.text[this.i] !== '\t') {
      this.i++;
    }
    return this.text.slice(from, this.i);
  }
}

function parseSample(line: string, lineNumber: number, format: ExpositionFormat): Sample {
  const cursor = new Cursor(line, lineNumber);
  cursor.skipSpace();
  const bare = cursor.peek() === '{' ? '' : cursor.name();
  let before = cursor.i;
  cursor.skipSpace();
  let name = bare;
  let labels: Record<string, string> = {};
  if (cursor.peek() === '{') {
    ({ name, labels } = parseLabels(cursor, bare));
    before = cursor.i;
    cursor.skipSpace();
  }
  if (name === '') cursor.fail('sample without a metric name');
  if (cursor.i === before) cursor.fail('expected a space before the value');
  const value = parseValue(cursor.token(), cursor);
  cursor.skipSpace();
  let timestampMs: number | undefined;
  if (cursor.i < line.length && cursor.peek() !== '#') {
    timestampMs = parseTimestamp(cursor.token(), format, cursor);
    cursor.skipSpace();
  }
  if (cursor.i < line.length) checkExemplar(line.slice(cursor.i), cursor);
  return timestampMs === undefined ? { name, labels, value } : { name, labels, value, timestampMs };
}

/**
 * An exemplar (` # {labels} value [timestamp]`, OpenMetrics; some text-format exporters emit
 * them too) is checked for shape and dropped; anything else after the sample is an error.
 */
function checkExemplar(rest: string, cursor: Cursor): void {
  if (!/^# \{.*\} \S+( \S+)?\s*$/.test(rest)) cursor.fail('unexpected text after the sample');
}

/** `{` … `}`: labels, and a quoted metric name standing alone first (UTF-8 names). */
function parseLabels(
  cursor: Cursor,
  bareName: string,
): { name: string; labels: Record<string, string> } {
  let name = bareName;
  const labels: Record<string, string> = {};
  cursor.i++; // {
  for (let first = true; ; first = false) {
    cursor.skipSpace();
    if (cursor.peek() === '}') break;
    const quoted = cursor.peek() === '"';
    const labelName = quoted ? cursor.quoted() : cursor.name();
    cursor.skipSpace();
    if (quoted && first && name === '' && cursor.peek() !== '=') {
      name = labelName;
    } else {
      if (cursor.peek() !== '=') cursor.fail(`expected = after label ${labelName}`);
      cursor.i++;
      cursor.skipSpace();
      if (Object.hasOwn(labels, labelName)) cursor.fail(`label ${labelName} repeated`);
      labels[labelName] = cursor.quoted();
      cursor.skipSpace();
    }
    if (cursor.peek() === '}') break;
    if (cursor.peek() !== ',') cursor.fail('expected , or } after a label');
    cursor.i++;
  }
  cursor.i++; // }
  return { name, labels };
}

function parseValue(text: string, cursor: Cursor): number {
  switch (text.toLowerCase()) {
    case 'nan':
      return Number.NaN;
    case '+inf':
    case 'inf':
      return Number.POSITIVE_INFINITY;
    case '-inf':
      return Number.NEGATIVE_INFINITY;
    default:
  }
  if (
    !/^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/.test(text) &&
    !/^[+-]?0[xX][0-9a-fA-F]+$/.test(text)
  ) {
    cursor.fail(`"${text}" is not a number`);
  }
  return Number(text);
}

function parseTimestamp(text: string, format: ExpositionFormat, cursor: Cursor): number {
  if (format === 'openmetrics') {
    // Seconds, possibly fractional.
    if (!/^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/.test(text))
      cursor.fail(`"${text}" is not a timestamp`);
    return Math.round(Number(text) * 1000);
  }
  if (!/^-?\d+$/.test(text)) cursor.fail(`"${text}" is not a timestamp in milliseconds`);
  const ms = Number(text);
  if (!Number.isSafeInteger(ms)) cursor.fail(`timestamp ${text} is out of range`);
  return ms;
}
