// Helpers shared by the buffer's tests and benchmark: temp directories, captured logs, items.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import type { BufferItem, ItemKind } from '../../collector/buffer/types.js';

export interface CapturedLogger {
  readonly logger: Logger;
  readonly lines: { level: number; msg: string; [key: string]: unknown }[];
}

/** A pino logger whose JSON lines are parsed into `lines` instead of printed. */
export function captureLogger(): CapturedLogger {
  const lines: CapturedLogger['lines'] = [];
  const logger = pino(
    { level: 'debug' },
    { write: (line: string) => lines.push(JSON.parse(line) as CapturedLogger['lines'][number]) },
  );
  return { logger, lines };
}

export interface TempDir {
  readonly path: string;
  remove(): void;
}

export function makeTempDir(prefix = 'kubexa-buffer-'): TempDir {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return {
    path,
    remove: () => {
      rmSync(path, { recursive: true, force: true });
    },
  };
}

/** Item number `n`: id `i-<n>` (fixed width, so every item has the same size), a payload of `size` bytes that starts with the number. */
export function makeItem(n: number, kind: ItemKind = 'log', size = 200): BufferItem {
  const payload = Buffer.alloc(size, 0x2e);
  payload.write(`#${n}#`);
  return { id: `i-${String(n).padStart(6, '0')}`, kind, payload };
}

/** The numbers of the given items' ids, for order assertions. */
export const numbers = (items: readonly BufferItem[]): number[] =>
  items.map((i) => Number(i.id.slice(2)));
