// The TABLE view's answer, filtered and sanitized on its bytes, without parsing it whole.
//
// A 500-row Table is about 250 KB of JSON; JSON.parse and JSON.stringify of it cost more than
// the API server took to send it (the query bench's LIST row). Only a few places of it change:
// each row's `object` (its metadata's managedFields and last-applied annotation, a Secret's data
// and stringData) and the rows the names patterns drop. So the answer is walked once, as bytes:
// every value the rules do not read is skipped and copied as the API server wrote it (numbers
// stay byte-identical without the lossless-JSON detour), and the kept ranges are copied once into
// the payload. The rules are exactly sanitizeObject's and the parsed path's; table-scan.test.ts
// compares the two on generated tables.
//
// Anything this walker does not expect (malformed JSON, a key it reads that appears twice, a top
// level that is not an object) throws TableShapeError, and the caller answers through the parsed
// path instead, which gives the exact error, or the exact result, that path gives.
import { parseLossless } from './lossless-json.js';
import { namesAllow, type NamePattern } from './policy.js';
import { LAST_APPLIED_ANNOTATION } from './sanitize.js';

/** The answer was not in the shape this walker handles; use the parsed path. */
export class TableShapeError extends Error {
  constructor(message: string, at: number) {
    super(`${message} at byte ${String(at)}`);
    this.name = 'TableShapeError';
  }
}

export interface ScannedTable {
  /** False when the answer is a JSON object whose kind is not "Table" (payload then empty). */
  readonly isTable: boolean;
  readonly payload: Buffer;
  /** The Table's own metadata, parsed (it is small): continue and remainingItemCount. */
  readonly metadata: unknown;
}

export interface TableScanOptions {
  readonly names: readonly NamePattern[];
  /** The plural the query named: a Secret is known by it, as sanitizeObject does. */
  readonly resource: string;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
const ROWS_MEMBER = Buffer.from('"rows":[]');
const LITERALS = new Set(['true', 'false', 'null']);

const key = (text: string): Buffer => Buffer.from(text, 'utf8');
const KEYS = {
  rows: key('rows'),
  kind: key('kind'),
  metadata: key('metadata'),
  object: key('object'),
  name: key('name'),
  annotations: key('annotations'),
  managedFields: key('managedFields'),
  data: key('data'),
  stringData: key('stringData'),
  lastApplied: key(LAST_APPLIED_ANNOTATION),
} as const;

/** A member of an object: `"key": value`, as byte offsets into the answer. */
interface Member {
  /** The key's first byte after its opening quote, and its closing quote. */
  readonly keyStart: number;
  readonly keyEnd: number;
  /** The key had an escape: compare it decoded. */
  readonly keyEscaped: boolean;
  readonly valueStart: number;
  readonly end: number;
  /** The value's members, when the value is an object the walk descended into. */
  readonly children: Member[] | undefined;
}

/**
 * The payload, written straight into one Buffer: the answer's ranges and single bytes. It is never
 * longer than the answer plus `"rows":[]` (members are only dropped, never added, except that).
 *
 * Ranges of the answer are not copied at once: a range that starts where the pending one ends, or
 * a single byte equal to the answer's next byte there, extends the pending range, so a kept row
 * (its members and the braces and commas between them, as the API server wrote them) is copied in
 * one piece. The bytes written are the same either way.
 */
class Output {
  readonly bytes: Buffer;
  private readonly source: Buffer;
  private written = 0;
  /** The range of `source` not yet copied, written after `written`. */
  private pendingStart = 0;
  private pendingEnd = 0;
  constructor(source: Buffer, capacity: number) {
    this.source = source;
    this.bytes = Buffer.allocUnsafe(capacity);
  }
  /** Where the next byte goes: mark, then reset to drop what was written after. */
  get at(): number {
    return this.written + this.pendingEnd - this.pendingStart;
  }
  reset(at: number): void {
    this.flush();
    this.written = at;
  }
  private flush(): void {
    const start = this.pendingStart;
    const end = this.pendingEnd;
    if (end === start) return;
    this.pendingStart = this.pendingEnd = 0;
    // A native copy costs more than a short loop.
    if (end - start < 32) {
      const bytes = this.bytes;
      const source = this.source;
      let at = this.written;
      for (let i = start; i < end; i++) bytes[at++] = source[i] ?? 0;
      this.written = at;
      return;
    }
    this.written += this.source.copy(this.bytes, this.written, start, end);
  }
  range(source: Buffer, start: number, end: number): void {
    if (source === this.source) {
      if (start === this.pendingEnd && end >= start) {
        this.pendingEnd = end;
        return;
      }
      this.flush();
      this.pendingStart = start;
      this.pendingEnd = end;
      return;
    }
    this.flush();
    this.written += source.copy(this.bytes, this.written, start, end);
  }
  byte(code: number): void {
    if (this.pendingEnd !== this.pendingStart && this.source[this.pendingEnd] === code) {
      this.pendingEnd++;
      return;
    }
    this.flush();
    this.bytes[this.written++] = code;
  }
  /** The payload written: the Buffer's first bytes. */
  finish(): Buffer {
    this.flush();
    return this.bytes.subarray(0, this.written);
  }
}

function skipSpace(body: Buffer, at: number): number {
  let i = at;
  for (;;) {
    const code = body[i];
    if (code !== 0x20 && code !== 0x0a && code !== 0x0d && code !== 0x09) return i;
    i++;
  }
}

/** Whether the last string stringEnd walked had an escape in it. */
let lastStringEscaped = false;

/** The index just past the string whose opening quote is at `at`. */
function stringEnd(body: Buffer, at: number): number {
  const length = body.length;
  let escaped = false;
  let i = at + 1;
  while (i < length) {
    const code = body[i];
    if (code === QUOTE) {
      lastStringEscaped = escaped;
      return i + 1;
    }
    if (code === BACKSLASH) {
      escaped = true;
      i += 2;
    } else {
      i++;
    }
  }
  throw new TableShapeError('unterminated string', at);
}

/** The open brackets of the value valueEnd walks (JSON.parse refuses deeper nesting too). */
const closers = new Uint8Array(10_000);

/** The index just past the array or object that starts at `at`. */
function containerEnd(body: Buffer, at: number): number {
  // Brackets are matched by kind: a stack of the closing byte each open one expects.
  const length = body.length;
  let depth = 0;
  let i = at;
  while (i < length) {
    const code = body[i];
    if (code === QUOTE) {
      i = stringEnd(body, i);
      continue;
    }
    if (code === OPEN_OBJECT || code === OPEN_ARRAY) {
      if (depth === closers.length) throw new TableShapeError('nested too deep', i);
      closers[depth++] = code + 2;
    } else if (code === CLOSE_OBJECT || code === CLOSE_ARRAY) {
      depth--;
      if (closers[depth] !== code) throw new TableShapeError('mismatched bracket', i);
      if (depth === 0) return i + 1;
    }
    i++;
  }
  throw new TableShapeError('unterminated container', at);
}

function endsPrimitive(code: number | undefined): boolean {
  return (
    code === undefined ||
    code === COMMA ||
    code === CLOSE_OBJECT ||
    code === CLOSE_ARRAY ||
    code === 0x20 ||
    code === 0x0a ||
    code === 0x0d ||
    code === 0x09
  );
}

/** The index just past the value that starts at `at` (no leading space). */
function valueEnd(body: Buffer, at: number): number {
  const first = body[at];
  if (first === QUOTE) return stringEnd(body, at);
  if (first === OPEN_OBJECT || first === OPEN_ARRAY) return containerEnd(body, at);
  let i = at;
  while (!endsPrimitive(body[i])) i++;
  const token = body.toString('latin1', at, i);
  if (!LITERALS.has(token) && !NUMBER.test(token)) {
    throw new TableShapeError('not a JSON value', at);
  }
  return i;
}

function isKey(
  body: Buffer,
  member: Pick<Member, 'keyStart' | 'keyEnd' | 'keyEscaped'>,
  expected: Buffer,
): boolean {
  if (member.keyEscaped) {
    const text = JSON.parse(
      body.toString('utf8', member.keyStart - 1, member.keyEnd + 1),
    ) as string;
    return text === expected.toString('utf8');
  }
  const length = member.keyEnd - member.keyStart;
  if (length !== expected.length) return false;
  for (let i = 0; i < length; i++) {
    if (body[member.keyStart + i] !== expected[i]) return false;
  }
  return true;
}

/** The one member with this key; two of them (JSON.parse would keep the last) are refused. */
function only(body: Buffer, members: readonly Member[], expected: Buffer): Member | undefined {
  let found: Member | undefined;
  for (const member of members) {
    if (!isKey(body, member, expected)) continue;
    if (found !== undefined) throw new TableShapeError('a duplicate key', member.keyStart);
    found = member;
  }
  return found;
}

/**
 * The object members the walk enters, level by level: a row's "object", its "metadata", their
 * "annotations". Every other value is skipped whole.
 */
const DESCEND: readonly Buffer[] = [KEYS.object, KEYS.metadata, KEYS.annotations];

/**
 * The members of the object that starts at `at`. At a row's level (0) and below, the value of the
 * key DESCEND names for that level, when it is an object, is walked into at once (its members in
 * `children`), so no byte is walked twice. Without a level, nothing is entered.
 */
function membersOf(body: Buffer, at: number, level?: number): { members: Member[]; end: number } {
  const enter = level === undefined ? undefined : DESCEND[level];
  const members: Member[] = [];
  let i = skipSpace(body, at + 1);
  if (body[i] === CLOSE_OBJECT) return { members, end: i + 1 };
  for (;;) {
    if (body[i] !== QUOTE) throw new TableShapeError('expected a key', i);
    const keyStart = i + 1;
    const afterKey = stringEnd(body, i);
    const keyEnd = afterKey - 1;
    const keyEscaped = lastStringEscaped;
    let j = skipSpace(body, afterKey);
    if (body[j] !== COLON) throw new TableShapeError('expected a colon', j);
    j = skipSpace(body, j + 1);
    let end: number;
    let children: Member[] | undefined;
    if (
      enter !== undefined &&
      body[j] === OPEN_OBJECT &&
      isKey(body, { keyStart, keyEnd, keyEscaped }, enter)
    ) {
      const nested = membersOf(body, j, (level ?? 0) + 1);
      children = nested.members;
      end = nested.end;
    } else {
      end = valueEnd(body, j);
    }
    members.push({ keyStart, keyEnd, keyEscaped, valueStart: j, end, children });
    i = skipSpace(body, end);
    if (body[i] === COMMA) {
      i = skipSpace(body, i + 1);
      continue;
    }
    if (body[i] === CLOSE_OBJECT) return { members, end: i + 1 };
    throw new TableShapeError('expected a comma or a closing brace', i);
  }
}

/** Writes `{members...}`, each member copied whole, dropped, or its value written by a function. */
function writeObject(
  body: Buffer,
  out: Output,
  members: readonly Member[],
  edit: (member: Member) => 'copy' | 'drop' | ((out: Output) => void),
): void {
  out.byte(OPEN_OBJECT);
  let first = true;
  for (const member of members) {
    const action = edit(member);
    if (action === 'drop') continue;
    if (!first) out.byte(COMMA);
    first = false;
    if (action === 'copy') {
      out.range(body, member.keyStart - 1, member.end);
    } else {
      out.range(body, member.keyStart - 1, member.valueStart);
      action(out);
    }
  }
  out.byte(CLOSE_OBJECT);
}

/** sanitizeMetadata on bytes: managedFields out, the last-applied annotation out. */
function writeMetadata(body: Buffer, out: Output, members: readonly Member[]): void {
  writeObject(body, out, members, (member) => {
    if (isKey(body, member, KEYS.managedFields)) return 'drop';
    if (member.children === undefined || !isKey(body, member, KEYS.annotations)) return 'copy';
    const annotations = member.children;
    const kept = annotations.filter((a) => !isKey(body, a, KEYS.lastApplied));
    if (kept.length === annotations.length) return 'copy';
    if (kept.length === 0) return 'drop';
    return (o) => {
      writeObject(body, o, kept, () => 'copy');
    };
  });
}

function stringOf(body: Buffer, member: Member | undefined): string | undefined {
  if (member === undefined || body[member.valueStart] !== QUOTE) return undefined;
  for (let i = member.valueStart + 1; i < member.end - 1; i++) {
    if (body[i] === BACKSLASH) {
      return JSON.parse(body.toString('utf8', member.valueStart, member.end)) as string;
    }
  }
  return body.toString('utf8', member.valueStart + 1, member.end - 1);
}

/** Whether the member's value is the literal null (valueEnd checked the token). */
function isNull(body: Buffer, member: Member): boolean {
  const at = member.valueStart;
  return (
    member.end - at === 4 &&
    body[at] === 0x6e &&
    body[at + 1] === 0x75 &&
    body[at + 2] === 0x6c &&
    body[at + 3] === 0x6c
  );
}

const SECRET_KIND = Buffer.from('"Secret"', 'utf8');

/** stringOf(...) === 'Secret', without decoding a string that has no escape. */
function isSecretKind(body: Buffer, member: Member | undefined): boolean {
  if (member === undefined || body[member.valueStart] !== QUOTE) return false;
  const start = member.valueStart;
  if (member.end - start === SECRET_KIND.length) {
    let same = true;
    for (let i = 0; i < SECRET_KIND.length; i++) {
      if (body[start + i] !== SECRET_KIND[i]) {
        same = false;
        break;
      }
    }
    if (same) return true;
  }
  for (let i = start + 1; i < member.end - 1; i++) {
    if (body[i] === BACKSLASH) return stringOf(body, member) === 'Secret';
  }
  return false;
}

/**
 * Whether a row with this metadata.name is kept: a name that is not a string drops it, and the
 * name is decoded only when there are patterns to match.
 */
function nameAllowed(body: Buffer, options: TableScanOptions, name: Member | undefined): boolean {
  if (name === undefined || body[name.valueStart] !== QUOTE) return false;
  return options.names.length === 0 || namesAllow(options.names, stringOf(body, name) ?? '');
}

interface RowContext {
  readonly body: Buffer;
  readonly options: TableScanOptions;
  readonly secretsByResource: boolean;
}

/**
 * One row, written to `out` unless dropped (false). The parsed path's rules: a row without an
 * object (or a null one) is kept only when there are no names patterns; an object that is not an
 * object or has no string metadata.name is dropped; a name the patterns refuse is dropped.
 */
function writeRow(context: RowContext, out: Output, row: readonly Member[]): boolean {
  const { body, options } = context;
  const objectMember = only(body, row, KEYS.object);
  if (objectMember === undefined || isNull(body, objectMember)) {
    if (options.names.length > 0) return false;
    writeObject(body, out, row, () => 'copy');
    return true;
  }
  const object = objectMember.children;
  if (object === undefined) return false;
  const metadata = only(body, object, KEYS.metadata)?.children;
  if (metadata === undefined) return false;
  if (!nameAllowed(body, options, only(body, metadata, KEYS.name))) return false;
  const isSecret = context.secretsByResource || isSecretKind(body, only(body, object, KEYS.kind));
  // The TABLE view never carries Secret values, whatever redaction says (the seed's promise).
  writeObject(body, out, row, (member) => {
    if (member !== objectMember) return 'copy';
    return (o) => {
      writeObject(body, o, object, (field) => {
        if (isSecret && (isKey(body, field, KEYS.data) || isKey(body, field, KEYS.stringData))) {
          return 'drop';
        }
        if (field.children !== metadata) return 'copy';
        return (m) => {
          writeMetadata(body, m, metadata);
        };
      });
    };
  });
  return true;
}

/** The row that starts at `at`, written after a comma unless it is the first one written. */
function rowAt(
  context: RowContext,
  out: Output,
  at: number,
  first: boolean,
): { end: number; written: boolean } {
  const { body } = context;
  // Not an object: the parsed path drops it.
  if (body[at] !== OPEN_OBJECT) return { end: valueEnd(body, at), written: false };
  const row = membersOf(body, at, 0);
  const mark = out.at;
  if (!first) out.byte(COMMA);
  const written = writeRow(context, out, row.members);
  if (!written) out.reset(mark);
  return { end: row.end, written };
}

/** The rows array that starts at `at`: each row walked once, then written or dropped. */
function writeRows(context: RowContext, out: Output, at: number): number {
  const { body } = context;
  out.byte(OPEN_ARRAY);
  let first = true;
  let i = skipSpace(body, at + 1);
  if (body[i] !== CLOSE_ARRAY) {
    for (;;) {
      const row = rowAt(context, out, i, first);
      first &&= !row.written;
      i = skipSpace(body, row.end);
      if (body[i] === COMMA) {
        i = skipSpace(body, i + 1);
        continue;
      }
      if (body[i] === CLOSE_ARRAY) break;
      throw new TableShapeError('expected a comma or a closing bracket', i);
    }
  }
  out.byte(CLOSE_ARRAY);
  return i + 1;
}

/**
 * The answer's top-level object, written as it is walked: every member copied, except rows,
 * written by writeRows (so the rows, nearly all of the bytes, are walked once). Returns the
 * members (kind and metadata are read after).
 */
function writeTopLevel(context: RowContext, out: Output, at: number): Member[] {
  const { body } = context;
  const members: Member[] = [];
  let sawRows = false;
  out.byte(OPEN_OBJECT);
  let i = skipSpace(body, at + 1);
  while (body[i] !== CLOSE_OBJECT) {
    if (members.length > 0) {
      if (body[i] !== COMMA) throw new TableShapeError('expected a comma or a closing brace', i);
      i = skipSpace(body, i + 1);
      out.byte(COMMA);
    }
    if (body[i] !== QUOTE) throw new TableShapeError('expected a key', i);
    const keyStart = i + 1;
    const afterKey = stringEnd(body, i);
    const key = { keyStart, keyEnd: afterKey - 1, keyEscaped: lastStringEscaped };
    let j = skipSpace(body, afterKey);
    if (body[j] !== COLON) throw new TableShapeError('expected a colon', j);
    j = skipSpace(body, j + 1);
    let end: number;
    if (isKey(body, key, KEYS.rows)) {
      if (sawRows) throw new TableShapeError('a duplicate key', keyStart);
      sawRows = true;
      out.range(body, keyStart - 1, j);
      if (body[j] === OPEN_ARRAY) {
        end = writeRows(context, out, j);
      } else {
        // Not an array (null): the parsed path answers with no rows.
        end = valueEnd(body, j);
        out.byte(OPEN_ARRAY);
        out.byte(CLOSE_ARRAY);
      }
    } else {
      end = valueEnd(body, j);
      out.range(body, keyStart - 1, end);
    }
    members.push({ ...key, valueStart: j, end, children: undefined });
    i = skipSpace(body, end);
  }
  if (!sawRows) {
    // The parsed path sets rows on a Table that has none.
    if (members.length > 0) out.byte(COMMA);
    out.range(ROWS_MEMBER, 0, ROWS_MEMBER.length);
  }
  out.byte(CLOSE_OBJECT);
  if (skipSpace(body, i + 1) !== body.length) throw new TableShapeError('trailing bytes', i + 1);
  return members;
}

/** Filters and sanitizes a Table answer on its bytes; throws TableShapeError when it cannot. */
export function scanTable(body: Buffer, options: TableScanOptions): ScannedTable {
  const start = skipSpace(body, 0);
  if (body[start] !== OPEN_OBJECT) throw new TableShapeError('not an object', start);
  const context: RowContext = { body, options, secretsByResource: options.resource === 'secrets' };
  const out = new Output(body, body.length + ROWS_MEMBER.length + 1);
  const members = writeTopLevel(context, out, start);
  const metadataMember = only(body, members, KEYS.metadata);
  const metadata =
    metadataMember === undefined
      ? undefined
      : parseLossless(body.toString('utf8', metadataMember.valueStart, metadataMember.end));
  if (stringOf(body, only(body, members, KEYS.kind)) !== 'Table') {
    return { isTable: false, payload: Buffer.alloc(0), metadata };
  }
  return { isTable: true, payload: out.finish(), metadata };
}
