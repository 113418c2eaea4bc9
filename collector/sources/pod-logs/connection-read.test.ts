// One log connection on its own: lines and bytes counted, the end of a stream the server ended
// kept whole, the fragment of a connection closed on our side dropped, an idle connection
// closed by the watchdog, a failure reported (not thrown).
import { PassThrough } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { FakeClock } from '../../../test/helpers/fake-clock.js';
import { memoryOnlyCheckpoints } from './checkpoint-store.js';
import { readLogConnection, type ConnectionDeps } from './connection-read.js';
import { ContainerLog, DEFAULT_INGEST_LIMITS } from './container-log.js';
import type { LogRequest, PodLogReader } from './kube-access.js';

const WAIT = { timeout: 10_000 };
const instance = { podUid: 'uid-1', container: 'app', restartCount: 0 };
const request: LogRequest = { namespace: 'ns', pod: 'p', container: 'app', follow: true };
const line = (nanos: number, text: string): string =>
  `2025-03-01T10:00:07.${String(nanos).padStart(9, '0')}Z ${text}`;

function newLog(): ContainerLog {
  return new ContainerLog({
    instance,
    base: {
      podName: 'p',
      namespace: 'ns',
      container: 'app',
      labels: {},
      workload: '',
      workloadKind: '',
      nodeName: 'n',
    },
    saved: memoryOnlyCheckpoints.load(instance),
    limits: DEFAULT_INGEST_LIMITS,
    maxBatchEntries: 100,
    maxBatchBytes: 1 << 20,
    nowMs: 0,
    onDrop: () => undefined,
  });
}

/** A reader whose one connection's body the test writes; ends it on abort. */
function bodyReader() {
  const body = new PassThrough();
  const reader: PodLogReader = {
    read: async (_request, signal, onChunk) => {
      signal.addEventListener('abort', () => body.end(), { once: true });
      for await (const chunk of body as AsyncIterable<Buffer>) onChunk(chunk);
    },
  };
  return { body, reader };
}

function setUp(logs: PodLogReader) {
  const clock = new FakeClock();
  const counted = { lines: 0, bytes: 0, flushes: [] as string[] };
  const deps: ConnectionDeps = {
    clock,
    logs,
    idleMs: 10_000,
    maxLineBytes: 0,
    countRead: (lines, bytes) => {
      counted.lines += lines;
      counted.bytes += bytes;
    },
    requestFlush: (scope) => counted.flushes.push(scope),
  };
  const hooks = {
    close: undefined as (() => void) | undefined,
    ended: [] as { lines: number; advanced: boolean }[],
  };
  const log = newLog();
  const run = (signal = new AbortController().signal) =>
    readLogConnection({ log, request, signal }, deps, {
      opened: (close) => {
        hooks.close = close;
      },
      ended: (read) => hooks.ended.push({ lines: read.lines, advanced: read.advanced }),
    });
  return { clock, counted, hooks, log, run };
}

describe('readLogConnection', () => {
  it('counts lines and bytes, keeps the unterminated last line of a stream the server ended', async () => {
    const { body, reader } = bodyReader();
    const { counted, hooks, log, run } = setUp(reader);
    const reading = run();
    const text = `${line(1, 'a')}\n${line(2, 'b')}\n${line(3, 'c')}`;
    body.write(text);
    body.end();
    const read = await reading;
    expect(read).toMatchObject({ lines: 3, advanced: true, closedByUs: false, failed: false });
    expect(counted).toEqual({ lines: 3, bytes: Buffer.byteLength(text), flushes: ['all'] });
    expect(hooks.ended).toEqual([{ lines: 3, advanced: true }]);
    expect(log.resumeAfter()?.nanos).toBe(3);
  });

  it('drops the fragment of a connection it closed itself', async () => {
    const { body, reader } = bodyReader();
    const { counted, hooks, log, run } = setUp(reader);
    const reading = run();
    body.write(`${line(1, 'a')}\n${line(2, 'half of b')}`);
    await vi.waitFor(() => {
      expect(counted.lines).toBe(1);
    }, WAIT);
    hooks.close?.();
    const read = await reading;
    expect(read).toMatchObject({ lines: 1, closedByUs: true, failed: false });
    expect(log.resumeAfter()?.nanos).toBe(1);
  });

  it('is closed by the watchdog when no byte came for idleMs, and not before', async () => {
    const { body, reader } = bodyReader();
    const { clock, counted, run } = setUp(reader);
    let done = false;
    const reading = run().finally(() => {
      done = true;
    });
    await clock.waitForSleep((ms) => ms === 10_000);
    clock.advance(6_000);
    body.write(`${line(1, 'a')}\n`);
    await vi.waitFor(() => {
      expect(counted.lines).toBe(1);
    }, WAIT);
    // 10 s after the start but only 4 s after the last byte: still open, sleeping the 6 s left.
    clock.advance(4_000);
    await vi.waitFor(() => {
      expect(done || clock.pending().includes(6_000)).toBe(true);
    }, WAIT);
    expect(done).toBe(false);
    clock.advance(6_000);
    const read = await reading;
    expect(read).toMatchObject({ lines: 1, closedByUs: true, failed: false });
  });

  it('reports a failed request as failed, with its error', async () => {
    const refused = Object.assign(new Error('forbidden'), { statusCode: 403 });
    const { run, counted } = setUp({ read: () => Promise.reject(refused) });
    const read = await run();
    expect(read).toMatchObject({ lines: 0, advanced: false, failed: true, error: refused });
    expect(counted.flushes).toEqual(['all']);
  });

  it('ends quietly, not failed, when the session aborts it', async () => {
    const { reader } = bodyReader();
    const { run } = setUp(reader);
    const session = new AbortController();
    const reading = run(session.signal);
    session.abort();
    const read = await reading;
    expect(read).toMatchObject({ failed: false, closedByUs: false });
  });
});
