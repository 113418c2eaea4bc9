// A growable byte buffer with the protobuf wire primitives the log path needs (varints, UTF-8,
// raw bytes). The generated encoder builds a chain of small writes per field and forks per
// nested message; the log path writes one entry at a time into one buffer instead, with every
// length known before it is written (see log-entry-encoder.ts).

/** Bytes a varint of this unsigned 32-bit value takes. */
export function varint32Size(value: number): number {
  if (value < 0x80) return 1;
  if (value < 0x4000) return 2;
  if (value < 0x200000) return 3;
  if (value < 0x10000000) return 4;
  return 5;
}

/** Bytes a varint of the unsigned 64-bit value `hi * 2^32 + lo` takes. */
export function varint64Size(lo: number, hi: number): number {
  if (hi === 0) return varint32Size(lo);
  // Each varint byte carries 7 bits: lo's 32 plus the significant bits of hi.
  return Math.ceil((64 - Math.clz32(hi)) / 7);
}

/**
 * Buffer's own UTF-8 writer, `utf8Write(text, offset, maxBytes)`: what `buffer.write(text,
 * offset, length, 'utf8')` ends in after normalising its arguments, which costs more than the
 * write itself for a 100-byte line. Present on Buffer.prototype in every Node version this
 * runs on (20 to 24); `write` is the fallback should one drop it.
 */
type Utf8Write = (this: Buffer, text: string, offset: number, maxBytes: number) => number;
const nativeUtf8Write = (Buffer.prototype as unknown as { utf8Write?: Utf8Write }).utf8Write;
const utf8Write: Utf8Write =
  typeof nativeUtf8Write === 'function'
    ? nativeUtf8Write
    : function write(this: Buffer, text, offset, maxBytes) {
        return this.write(text, offset, maxBytes, 'utf8');
      };

/** Below this many bytes a copy is a loop: cheaper than a TypedArray.set call. */
const SMALL_COPY = 48;

const TWO_32 = 4294967296;
const NANOS_PER_SECOND = 1e9;

/**
 * Splits `sec * 1e9 + nanos` (unix nanoseconds, above 2^53) into its low and high 32 bits with
 * exact double arithmetic: no BigInt and no decimal string per line. `sec` must be in
 * [0, 2^33), which covers every date until the year 2242.
 */
export function splitNanos(sec: number, nanos: number, out: { lo: number; hi: number }): void {
  const secHigh = Math.floor(sec / 65536);
  const secLow = sec - secHigh * 65536;
  // secLow * 1e9 + nanos < 2^47 and secHigh * 1e9 < 2^47: both exact.
  const low = secLow * NANOS_PER_SECOND + nanos;
  const mid = secHigh * NANOS_PER_SECOND;
  const midLow = mid % 65536;
  let lo = midLow * 65536 + low;
  let hi = (mid - midLow) / 65536;
  const carry = Math.floor(lo / TWO_32);
  lo -= carry * TWO_32;
  hi += carry;
  out.lo = lo;
  out.hi = hi;
}

export class ProtoWriter {
  #buffer: Buffer;
  #length = 0;

  /** `pooled: false` allocates outside Node's shared pool (for a buffer that lives long). */
  constructor(initialCapacity = 16 * 1024, { pooled = true }: { pooled?: boolean } = {}) {
    const capacity = Math.max(1, initialCapacity);
    this.#buffer = pooled ? Buffer.allocUnsafe(capacity) : Buffer.allocUnsafeSlow(capacity);
  }

  get length(): number {
    return this.#length;
  }

  get capacity(): number {
    return this.#buffer.length;
  }

  /** Makes room for `bytes` more bytes: every write below assumes its room was reserved. */
  reserve(bytes: number): void {
    const needed = this.#length + bytes;
    if (needed <= this.#buffer.length) return;
    let capacity = Math.max(64, this.#buffer.length * 2);
    while (capacity < needed) capacity *= 2;
    const grown = Buffer.allocUnsafe(capacity);
    this.#buffer.copy(grown, 0, 0, this.#length);
    this.#buffer = grown;
  }

  byte(value: number): void {
    this.#buffer[this.#length++] = value;
  }

  varint32(value: number): void {
    const buffer = this.#buffer;
    let v = value >>> 0;
    while (v >= 0x80) {
      buffer[this.#length++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    buffer[this.#length++] = v;
  }

  varint64(lo: number, hi: number): void {
    const buffer = this.#buffer;
    let low = lo >>> 0;
    let high = hi >>> 0;
    while (high > 0 || low >= 0x80) {
      buffer[this.#length++] = (low & 0x7f) | 0x80;
      low = ((low >>> 7) | (high << 25)) >>> 0;
      high >>>= 7;
    }
    buffer[this.#length++] = low;
  }

  /** Writes the UTF-8 bytes of `text`, whose byte length the caller knows (and reserved). */
  utf8(text: string, byteLength: number): void {
    utf8Write.call(this.#buffer, text, this.#length, byteLength);
    this.#length += byteLength;
  }

  bytes(data: Uint8Array): void {
    const buffer = this.#buffer;
    const length = data.length;
    if (length < SMALL_COPY) {
      let at = this.#length;
      for (let i = 0; i < length; i++) buffer[at++] = data[i] ?? 0;
    } else {
      buffer.set(data, this.#length);
    }
    this.#length += length;
  }

  /** Appends a copy of bytes already written, [start, end): the same text in a second field. */
  repeat(start: number, end: number): void {
    this.#buffer.copyWithin(this.#length, start, end);
    this.#length += end - start;
  }

  /** A view of what was written, valid until the next write or reset. */
  view(): Buffer {
    return this.#buffer.subarray(0, this.#length);
  }

  /** Forgets what was written; a buffer grown past `keepCapacity` is given back to the GC. */
  reset(keepCapacity: number): void {
    this.#length = 0;
    if (this.#buffer.length > keepCapacity) this.#buffer = Buffer.allocUnsafe(keepCapacity);
  }
}
