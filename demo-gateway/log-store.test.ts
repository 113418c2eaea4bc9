import { afterEach, describe, expect, it } from 'vitest';
import { AgentHealth, LogBatch, LogEntry, LogLevel } from '../proto/index.js';
import type { LogFilter } from './api-types.js';
import { logLinesOf, rateLimitMarker } from './log-lines.js';
import { MessageStore } from './message-store.js';

const stores: MessageStore[] = [];
afterEach(() => {
  for (const store of stores.splice(0)) store.close();
});

function open(): MessageStore {
  const store = new MessageStore();
  stores.push(store);
  return store;
}

const received = { sessionId: 's-1', receivedAt: 1_000_000 };

function entry(partial: Omit<Partial<LogEntry>, 'raw'> & { raw?: string }): LogEntry {
  const raw = partial.raw ?? partial.message ?? 'line';
  return LogEntry.fromPartial({
    namespace: 'shop',
    podName: 'web-1',
    container: 'nginx',
    workload: 'web',
    workloadKind: 'Deployment',
    nodeName: 'node-0',
    timestamp: '1764547200123456789',
    level: LogLevel.LOG_LEVEL_INFO,
    ...partial,
    message: partial.message ?? raw.split('\n')[0] ?? '',
    raw: Buffer.from(raw),
  });
}

function insertBatch(store: MessageStore, messageId: string, entries: LogEntry[]): boolean {
  return store.insert(
    {
      messageId,
      sessionId: 's-1',
      agentId: 'a',
      clusterId: 'c',
      kind: 'logs',
      receivedAt: received.receivedAt,
      summary: '',
      payload: new Uint8Array([1]),
    },
    logLinesOf(LogBatch.fromPartial({ entries }), received),
  );
}

const messages = (store: MessageStore, filter: LogFilter = {}): string[] =>
  store.logs.query(filter, { limit: 100 }).lines.map((l) => l.message);

describe('log records', () => {
  it('stores one row per entry of a batch, with the log time in ms and every line of a joined record', () => {
    const store = open();
    const trace = 'Traceback (most recent call last):\n  File "a.py", line 1\nValueError: x';
    insertBatch(store, 'm-1', [
      entry({ message: 'GET / 200' }),
      // The collector's message of a joined record carries every line, as raw does.
      entry({ raw: trace, message: trace, level: LogLevel.LOG_LEVEL_ERROR, truncated: true }),
    ]);
    const { lines } = store.logs.query({}, { limit: 10 });
    expect(lines.map((l) => l.message)).toEqual([
      'GET / 200',
      'Traceback (most recent call last):',
    ]);
    expect(lines[0]).toMatchObject({
      timeMs: 1764547200123,
      namespace: 'shop',
      pod: 'web-1',
      container: 'nginx',
      workload: 'web',
      workloadKind: 'Deployment',
      node: 'node-0',
      level: 2,
      raw: 'GET / 200',
      lineCount: 1,
      truncated: false,
    });
    expect(lines[1]).toMatchObject({ raw: trace, lineCount: 3, level: 4, truncated: true });
  });

  it('stores a redelivered batch once', () => {
    const store = open();
    expect(insertBatch(store, 'm-1', [entry({ message: 'a' }), entry({ message: 'b' })])).toBe(
      true,
    );
    expect(insertBatch(store, 'm-1', [entry({ message: 'a' }), entry({ message: 'b' })])).toBe(
      false,
    );
    expect(messages(store)).toEqual(['a', 'b']);
    expect(store.logs.stats(received.receivedAt).totalLines).toBe(2);
  });

  it('filters by namespace, workload, pod, container, level and text, each through its index', () => {
    const store = open();
    insertBatch(store, 'm-1', [
      entry({ message: 'shop info' }),
      entry({ message: 'shop error 50% off', level: LogLevel.LOG_LEVEL_ERROR }),
      entry({
        namespace: 'payments',
        podName: 'ledger-1',
        container: 'worker',
        workload: 'ledger',
        message: 'payments warn',
        level: LogLevel.LOG_LEVEL_WARN,
      }),
      entry({ message: 'no level', level: LogLevel.LOG_LEVEL_UNSPECIFIED }),
    ]);
    expect(messages(store, { namespace: 'payments' })).toEqual(['payments warn']);
    expect(messages(store, { workload: 'ledger' })).toEqual(['payments warn']);
    expect(messages(store, { pod: 'ledger-1' })).toEqual(['payments warn']);
    expect(messages(store, { container: 'worker' })).toEqual(['payments warn']);
    expect(messages(store, { level: 'error' })).toEqual(['shop error 50% off']);
    expect(messages(store, { level: 'warn,error' })).toEqual([
      'shop error 50% off',
      'payments warn',
    ]);
    expect(messages(store, { level: 'unknown' })).toEqual(['no level']);
    expect(messages(store, { namespace: 'shop', level: 'error' })).toEqual(['shop error 50% off']);
    // Case-insensitive; % and _ are literal characters, not wildcards.
    expect(messages(store, { text: 'SHOP' })).toEqual(['shop info', 'shop error 50% off']);
    expect(messages(store, { text: '50%' })).toEqual(['shop error 50% off']);
    expect(messages(store, { text: 'shop_' })).toEqual([]);
    expect(() => store.logs.query({ level: 'loud' }, { limit: 1 })).toThrow(
      /level: unknown level "loud"/,
    );

    for (const filter of [
      { namespace: 'x' },
      { workload: 'x' },
      { pod: 'x' },
      { container: 'x' },
      { level: 'error' },
    ]) {
      expect(store.logs.plan(filter).join(' ')).toMatch(/USING (COVERING )?INDEX log_lines_/);
    }
    expect(store.logs.facets()).toEqual({
      namespaces: ['payments', 'shop'],
      workloads: ['ledger', 'web'],
      pods: ['ledger-1', 'web-1'],
      containers: ['nginx', 'worker'],
    });
  });

  it('pages back from a cursor and follows after one', () => {
    const store = open();
    for (let i = 1; i <= 5; i++) insertBatch(store, `m-${i}`, [entry({ message: `line ${i}` })]);
    const newest = store.logs.query({}, { limit: 2 });
    expect(newest.lines.map((l) => l.message)).toEqual(['line 4', 'line 5']);
    expect(newest.hasOlder).toBe(true);
    const older = store.logs.query({}, { limit: 10, before: newest.lines[0]!.seq });
    expect(older.lines.map((l) => l.message)).toEqual(['line 1', 'line 2', 'line 3']);
    expect(older.hasOlder).toBe(false);
    insertBatch(store, 'm-6', [entry({ message: 'line 6' })]);
    const next = store.logs.query({}, { limit: 10, after: newest.newestSeq });
    expect(next.lines.map((l) => l.message)).toEqual(['line 6']);
  });

  it('counts lines per second and the containers that sent lines lately', () => {
    const store = open();
    insertBatch(store, 'm-1', [entry({}), entry({ container: 'sidecar' }), entry({})]);
    const stats = store.logs.stats(received.receivedAt + 500);
    expect(stats.linesPerSecond).toBe(0.3);
    expect(stats.containers.map((c) => `${c.container}:${c.lines}`).sort()).toEqual([
      'nginx:2',
      'sidecar:1',
    ]);
    expect(store.logs.stats(received.receivedAt + 11_000).linesPerSecond).toBe(0);
    expect(store.logs.stats(received.receivedAt + 6 * 60_000).containers).toEqual([]);
  });

  it('marks lines the agent dropped by rate limit where the heartbeat reports them', () => {
    const health = (n: number) => AgentHealth.fromPartial({ droppedRateLimited: String(n) });
    expect(rateLimitMarker(undefined, health(0), received)).toEqual([]);
    const marker = rateLimitMarker(
      {
        status: 'healthy',
        queueDepth: 0,
        droppedMessages: 0,
        truncatedLines: 0,
        droppedRateLimited: 3,
        metricsApi: '',
        at: 0,
      },
      health(10),
      received,
    );
    expect(marker).toHaveLength(1);
    expect(marker[0]).toMatchObject({ kind: 'rate-limited', level: 3 });
    expect(marker[0]!.message).toMatch(/^7 line\(s\) dropped by the agent's rate limit/);
  });
});
