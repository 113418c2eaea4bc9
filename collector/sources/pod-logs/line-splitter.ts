// Splits a byte stream into lines with a transport cap, so one endless line can never grow
// memory: bytes past the cap are dropped up to the next newline, and the line is marked cut.

/** One line without its newline; `cut` when bytes past the cap were dropped. */
export interface SplitLine {
  readonly text: string;
  readonly cut: boolean;
}

/** Receives each completed line; called synchronously from push(). */
export type LineHandler = (text: string, cut: boolean) => void;

/** Carry room kept between lines; a longer line's room is released after it. */
const CARRY_KEPT_BYTES = 16 * 1024;

export class LineSplitter {
  readonly #maxBytes: number;
  /**
   * The unfinished line carried between chunks, copied into one reused buffer: a followed log
   * arrives in 100-200 byte chunks, so most lines straddle two, and a list of copies joined by
   * Buffer.concat per line cost a fifth of the line path.
   */
  #carry: Buffer = Buffer.allocUnsafe(0);
  #partBytes = 0;
  #cut = false;

  /** `maxBytes <= 0`: unlimited. */
  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /**
   * Feeds a chunk, handing every line it completes to `onLine` (no array or object per line:
   * this runs for every chunk of every stream). Returns how many lines it completed.
   */
  push(chunk: Buffer, onLine: LineHandler): number {
    let lines = 0;
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(10, start);
      if (newline === -1) {
        this.#keep(chunk, start, chunk.length);
        return lines;
      }
      if (this.#partBytes === 0 && !this.#cut && this.#fits(newline - start)) {
        onLine(chunk.toString('utf8', start, newline), false);
      } else {
        this.#keep(chunk, start, newline);
        const line = this.#take();
        onLine(line.text, line.cut);
      }
      lines++;
      start = newline + 1;
    }
  }

  /** The final unterminated line, if any (at stream end). */
  end(): SplitLine | undefined {
    if (this.#partBytes === 0 && !this.#cut) return undefined;
    return this.#take();
  }

  #fits(bytes: number): boolean {
    return this.#maxBytes <= 0 || bytes <= this.#maxBytes;
  }

  /** Keeps `chunk[start, end)` of an unfinished line, up to the cap. */
  #keep(chunk: Buffer, start: number, end: number): void {
    const length = end - start;
    if (length === 0) return;
    const room = this.#maxBytes <= 0 ? length : this.#maxBytes - this.#partBytes;
    if (room < length) this.#cut = true;
    if (room <= 0) return;
    const kept = Math.min(room, length);
    // Copy: the chunk's memory belongs to the stream.
    const needed = this.#partBytes + kept;
    if (needed > this.#carry.length) {
      const grown = Buffer.allocUnsafe(Math.max(needed, this.#carry.length * 2, 256));
      this.#carry.copy(grown, 0, 0, this.#partBytes);
      this.#carry = grown;
    }
    chunk.copy(this.#carry, this.#partBytes, start, start + kept);
    this.#partBytes = needed;
  }

  #take(): SplitLine {
    const text = this.#carry.toString('utf8', 0, this.#partBytes);
    const line = { text: this.#cut ? dropBrokenTail(text) : text, cut: this.#cut };
    this.#partBytes = 0;
    this.#cut = false;
    // A carry grown by one long line goes back to the GC.
    if (this.#carry.length > CARRY_KEPT_BYTES) this.#carry = Buffer.allocUnsafe(0);
    return line;
  }
}

/** A cut inside a UTF-8 sequence decodes to U+FFFD at the end: drop that half character. */
function dropBrokenTail(text: string): string {
  return text.endsWith('\uFFFD') ? text.slice(0, -1) : text;
}
