// The queue's readiness over a real DurableBuffer and the real health server: a head of queue
// that keeps coming back, and a spill disk that could not be opened, both show in /readyz.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { bufferStats } from '../../test/helpers/buffer-stats.js';
import { makeItem, makeTempDir, type TempDir } from '../../test/helpers/buffer-test-support.js';
import { DurableBuffer } from '../buffer/durable-buffer.js';
import { createHealthServer, type HealthServer } from './health-server.js';
import { queueHealth, STUCK_HEAD_MS, STUCK_HEAD_RETURNS } from './queue-health.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function tempDir(): TempDir {
  const dir = makeTempDir();
  cleanups.push(() => {
    dir.remove();
  });
  return dir;
}

const CAPACITY = 10_000_000;

function openBuffer(path: string, now: () => number): DurableBuffer {
  const buffer = new DurableBuffer(
    { path, maxMemoryBytes: 1_000_000, maxDiskBytes: 9_000_000 },
    { logger: pino({ level: 'silent' }), now },
  );
  cleanups.push(() => buffer.close());
  return buffer;
}

async function readyz(buffer: DurableBuffer, now: () => number) {
  const server: HealthServer = createHealthServer(
    {
      health: { host: '127.0.0.1', port: 0 },
      metrics: { host: '127.0.0.1', port: 0 },
      checkTimeoutMs: 1000,
    },
    {
      logger: pino({ level: 'silent' }),
      registry: new Registry(),
      checks: [{ name: 'queue', check: () => queueHealth(buffer, CAPACITY, now()) }],
      now,
    },
  );
  await server.start(new AbortController().signal);
  cleanups.push(() => server.close());
  const response = await fetch(`http://127.0.0.1:${String(server.ports().health)}/readyz?verbose`);
  return {
    status: response.status,
    body: (await response.json()) as { components: { queue: { status: string; reason: string } } },
  };
}

describe('queue readiness', () => {
  it('reports a head of queue that keeps coming back unsettled as not ready', async () => {
    let now = 1_000_000;
    const buffer = openBuffer(join(tempDir().path, 'buffer.db'), () => now);
    for (let n = 0; n < 10; n++) buffer.enqueue(makeItem(n));
    // Sessions end on the same item: it comes back, and nothing behind it is acked.
    for (let round = 1; round < STUCK_HEAD_RETURNS; round++) {
      buffer.take(5);
      buffer.requeue();
      now += 1000;
    }
    expect(buffer.stats().head).toMatchObject({ id: 'i-000000', returns: STUCK_HEAD_RETURNS - 1 });
    expect((await readyz(buffer, () => now)).status).toBe(200);

    buffer.take(5);
    buffer.requeue();
    const { status, body } = await readyz(buffer, () => now);
    expect(status).toBe(503);
    expect(body.components.queue).toEqual({
      status: 'unhealthy',
      reason: expect.stringMatching(
        /^head of queue stuck: item i-000000 came back unsettled 3 times in 2 s/,
      ) as unknown,
    });

    // Once it is acked, the queue moves: ready again.
    const [head] = buffer.take(1);
    buffer.ack([head?.id ?? '']);
    expect(buffer.stats().head).toBeUndefined();
    expect((await readyz(buffer, () => now)).status).toBe(200);
  });

  it('reports a head of queue that came back and has not moved for a while', () => {
    const head = { id: 'x', returns: 1, since: 0 };
    expect(
      queueHealth({ stats: () => bufferStats({ head }) }, CAPACITY, STUCK_HEAD_MS - 1).state,
    ).toBe('ok');
    expect(queueHealth({ stats: () => bufferStats({ head }) }, CAPACITY, STUCK_HEAD_MS).state).toBe(
      'unhealthy',
    );
  });

  it('reports a spill disk that could not be opened, and the disk state when ready', async () => {
    const dir = tempDir();
    mkdirSync(join(dir.path, 'buffer.db')); // a directory: SQLITE_CANTOPEN, memory-only
    const memoryOnly = openBuffer(join(dir.path, 'buffer.db'), () => 0);
    const { status, body } = await readyz(memoryOnly, () => 0);
    expect(status).toBe(503);
    expect(body.components.queue).toEqual({
      status: 'degraded',
      reason: expect.stringContaining('spill disk unavailable: running memory-only') as unknown,
    });

    const healthy = openBuffer(join(dir.path, 'other.db'), () => 0);
    const ready = await readyz(healthy, () => 0);
    expect(ready.status).toBe(200);
    expect(ready.body.components.queue).toEqual({
      status: 'ok',
      reason: '0% full, disk available',
    });
    expect(
      queueHealth({ stats: () => bufferStats({ diskFull: true, quarantined: 2 }) }, CAPACITY, 0),
    ).toEqual({
      state: 'ok',
      reason: '0% full, disk available, disk full: writes paused, 2 records quarantined',
    });
  });
});
