// A console's output, numbered and kept until the far end acknowledges it: what a re-attached
// stream replays, and the window that bounds memory (the session pauses its source when the
// unacknowledged bytes pass the window, and resumes once acks bring them under half of it).

export interface OutputChunk {
  readonly seq: number;
  /** 1 stdout, 2 stderr (the channel numbers of the exec protocol). */
  readonly stream: 1 | 2;
  readonly data: Buffer;
}

export class OutputLog {
  private readonly chunks: OutputChunk[] = [];
  private nextSeq = 1;
  private heldBytes = 0;
  private ackedSeq = 0;

  /** Unacknowledged bytes above which the source should pause. */
  readonly windowBytes: number;
  /** Largest chunk; larger writes are split (gRPC messages stay small). */
  readonly maxChunkBytes: number;

  constructor(windowBytes: number, maxChunkBytes: number) {
    this.windowBytes = windowBytes;
    this.maxChunkBytes = maxChunkBytes;
  }

  /** Appends output, split into chunks; returns the new chunks in order. */
  append(stream: 1 | 2, data: Buffer): OutputChunk[] {
    const added: OutputChunk[] = [];
    for (let offset = 0; offset < data.length; offset += this.maxChunkBytes) {
      const chunk: OutputChunk = {
        seq: this.nextSeq++,
        stream,
        data: data.subarray(offset, offset + this.maxChunkBytes),
      };
      this.chunks.push(chunk);
      this.heldBytes += chunk.data.length;
      added.push(chunk);
    }
    return added;
  }

  /** Forgets everything up to `seq` (a value beyond the last sequence number is clamped). */
  ack(seq: number): void {
    const upTo = Math.min(seq, this.lastSeq());
    if (upTo <= this.ackedSeq) return;
    this.ackedSeq = upTo;
    while (this.chunks.length > 0 && (this.chunks[0]?.seq ?? Infinity) <= upTo) {
      const dropped = this.chunks.shift();
      this.heldBytes -= dropped?.data.length ?? 0;
    }
  }

  /** The chunks after `seq` still held (acknowledged ones are gone for good). */
  after(seq: number): OutputChunk[] {
    return this.chunks.filter((chunk) => chunk.seq > seq);
  }

  lastSeq(): number {
    return this.nextSeq - 1;
  }

  acked(): number {
    return this.ackedSeq;
  }

  /** Bytes held (sent or not, not yet acknowledged). */
  bytes(): number {
    return this.heldBytes;
  }

  full(): boolean {
    return this.heldBytes >= this.windowBytes;
  }

  /** Below half the window: a paused source may resume (hysteresis avoids flapping). */
  drained(): boolean {
    return this.heldBytes < this.windowBytes / 2;
  }
}
