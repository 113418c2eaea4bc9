// Audit records are durable buffer items the overflow policy never drops: with both tiers full,
// an incoming audit record evicts logs, and is kept even when only audit records are left.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { DurableBuffer } from '../buffer/durable-buffer.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('audit items in a full buffer', () => {
  it('are never dropped by the overflow policy', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-audit-'));
    dirs.push(dir);
    const drops: string[] = [];
    const buffer = new DurableBuffer(
      { path: join(dir, 'buffer.db'), maxMemoryBytes: 4096, maxDiskBytes: 4096 },
      {
        logger: pino({ level: 'silent' }),
        counters: {
          spilled: () => undefined,
          replayed: () => undefined,
          dropped: (reason) => drops.push(reason),
        },
      },
    );
    for (let i = 0; i < 8; i++) {
      buffer.enqueue({ id: `log-${i}`, kind: 'log', payload: new Uint8Array(1000) });
    }
    for (let i = 0; i < 12; i++) {
      buffer.enqueue({ id: `audit-${i}`, kind: 'audit', payload: new Uint8Array(1000) });
    }
    expect(drops.filter((reason) => reason === 'overflow_audit')).toEqual([]);
    const ids: string[] = [];
    for (;;) {
      const batch = buffer.take(100);
      if (batch.length === 0) break;
      ids.push(...batch.map((item) => item.id));
    }
    expect(ids.filter((id) => id.startsWith('audit-'))).toHaveLength(12);
    await buffer.close();
  });
});
