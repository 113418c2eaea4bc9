// Splits a byte stream into lines with a transport cap, so one endless line can never grow
// memory: bytes past the cap are dropped up to the next newline, and the line is marked cut.

/** One line without its newline; `cut` when bytes past the cap were dropped. */
export interface SplitLine {
  readonly text: string;
  readonly cut: boolean;
}

export class LineSplitter {
  readonly #maxBytes: number;
  #parts: Buffer[] = [];
  #partBytes = 0;
  #cut = false;

  /** `maxBytes <= 0`: unlimited. */
  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** Feeds a chunk; returns the lines it completed. */
  push(chunk: Buffer): SplitLine[] {
    const out: SplitLine[] = [];
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(10, start);
      if (newline === -1) {
        this.#keep(chunk.subarray(start));
        return out;
      }
      if (this.#partBytes === 0 && !this.#cut && this.#fits(newline - start)) {
        out.push({ text: chunk.toString('utf8', start, newline), cut: false });
      } else {
        this.#keep(chunk.subarray(start, newline));
        out.push(this.#take());
      }
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

  #keep(bytes: Buffer): void {
    if (bytes.length === 0) return;
    const room = this.#maxBytes <= 0 ? bytes.length : this.#maxBytes - this.#partBytes;
    if (room < bytes.length) this.#cut = true;
    if (room <= 0) return;
    const kept = room < bytes.length ? bytes.subarray(0, room) : bytes;
    // Copy: the chunk's memory belongs to the stream.
    this.#parts.push(Buffer.from(kept));
    this.#partBytes += kept.length;
  }

  #take(): SplitLine {
    const text = Buffer.concat(this.#parts, this.#partBytes).toString('utf8');
    const line = { text: this.#cut ? dropBrokenTail(text) : text, cut: this.#cut };
    this.#parts = [];
    this.#partBytes = 0;
    this.#cut = false;
    return line;
  }
}

/** A cut inside a UTF-8 sequence decodes to U+FFFD at the end: drop that half character. */
function dropBrokenTail(text: string): string {
  return text.endsWith('\uFFFD') ? text.slice(0, -1) : text;
}
