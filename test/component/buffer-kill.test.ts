import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { DurableBuffer } from '../../collector/buffer/durable-buffer.js';
import { makeTempDir, numbers } from '../helpers/buffer-test-support.js';
import type { BufferItem } from '../../collector/buffer/types.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const writer = join(root, 'test', 'fixtures', 'buffer-writer.ts');

describe('buffer after SIGKILL', () => {
  it('recovers every item that reached disk, in order, and never an acked one', async () => {
    const dir = makeTempDir();
    try {
      const path = join(dir.path, 'buffer.db');
      const child = spawn(process.execPath, ['--import', 'tsx', writer, path], {
        cwd: root,
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const exited = once(child, 'exit');
      let lastReport = { enqueued: 0, disk: 0 };
      for await (const line of createInterface({ input: child.stdout })) {
        lastReport = JSON.parse(line) as typeof lastReport;
        if (lastReport.enqueued >= 3_000) break;
      }
      child.kill('SIGKILL');
      const [, signal] = (await exited) as [number | null, string | null];
      expect(signal).toBe('SIGKILL');

      const buffer = new DurableBuffer(
        { path, maxMemoryBytes: 1_000_000, maxDiskBytes: 100_000_000 },
        { logger: pino({ level: 'silent' }) },
      );
      const recovered: BufferItem[] = [];
      for (let batch = buffer.take(500); batch.length > 0; batch = buffer.take(500)) {
        recovered.push(...batch);
      }
      await buffer.close();
      const ids = numbers(recovered);
      // 0..24 were acked: never replayed. 25..49 were in flight unacked: replayed first. Then
      // every spilled item, a gap-free prefix of what was enqueued; only the memory tier's
      // newest items (at most 20) are lost.
      expect(ids[0]).toBe(25);
      expect(ids).toEqual(Array.from({ length: ids.length }, (_, i) => 25 + i));
      expect(ids.length).toBeGreaterThanOrEqual(lastReport.disk);
      expect(ids.at(-1)).toBeGreaterThanOrEqual(lastReport.enqueued - 1 - 20);
    } finally {
      dir.remove();
    }
  });
});
