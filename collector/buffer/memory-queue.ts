import type { ItemKind } from './types.js';

/** An item held in memory with its global sequence number (FIFO order across both tiers). */
export interface MemoryItem {
  readonly seq: number;
  readonly id: string;
  readonly kind: ItemKind;
  readonly payload: Uint8Array;
  readonly bytes: number;
}

/**
 * FIFO of pending in-memory items with byte accounting. An array with a moving head, compacted
 * when half of it is consumed, so shift() is O(1) amortized without a linked list.
 */
export class MemoryQueue {
  #items: MemoryItem[] = [];
  #head = 0;
  #bytes = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  get bytes(): number {
    return this.#bytes;
  }

  push(item: MemoryItem): void {
    this.#items.push(item);
    this.#bytes += item.bytes;
  }

  /** The item at position `index` from the head, without removing it. */
  at(index: number): MemoryItem | undefined {
    return this.#items[this.#head + index];
  }

  shift(): MemoryItem | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const item = this.#items[this.#head];
    this.#head += 1;
    if (item) this.#bytes -= item.bytes;
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  /** Removes and returns the first `count` items. */
  shiftMany(count: number): MemoryItem[] {
    const out: MemoryItem[] = [];
    for (let i = 0; i < count; i++) {
      const item = this.shift();
      if (!item) break;
      out.push(item);
    }
    return out;
  }

  /**
   * Removes the oldest items of `kind` until at least `bytes` are freed (the overflow path,
   * rare: a linear pass is fine). Returns what was removed.
   */
  evictOldest(kind: ItemKind, bytes: number): MemoryItem[] {
    const evicted: MemoryItem[] = [];
    let freed = 0;
    const kept: MemoryItem[] = [];
    for (let i = this.#head; i < this.#items.length; i++) {
      const item = this.#items[i];
      if (!item) continue;
      if (freed < bytes && item.kind === kind) {
        evicted.push(item);
        freed += item.bytes;
      } else {
        kept.push(item);
      }
    }
    this.#items = kept;
    this.#head = 0;
    this.#bytes -= freed;
    return evicted;
  }
}
