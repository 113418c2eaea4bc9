// Free-text search over the demo gateway's log store: the trigram index must give exactly the
// answer of the LIKE it replaced (case-insensitive for ASCII only, every character literal, over
// the whole record), page for page. The reference below is that rule written in plain code.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LogBatch, LogEntry, LogLevel } from '../proto/index.js';
import type { LogFilter } from './api-types.js';
import { logLinesOf } from './log-lines.js';
import { COMMON_TEXT_RECORDS } from './log-store.js';
import { MessageStore } from './message-store.js';

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const step of cleanup.splice(0).reverse()) step();
});

const received = { sessionId: 's-1', receivedAt: 1_000_000 };

/** Records whose texts probe case, Unicode, LIKE's wildcards, quotes and multi-line records. */
const TEXTS = [
  'GET /api/items/42 200 12 ms',
  'get /API/items/7 404 3 ms',
  'payment declined for account acct-2231',
  'Payment DECLINED for ACCT-2231 (retry)',
  'Traceback (most recent call last):\n  File "app.py", line 9\nValueError: bad acct-2231',
  'discount 50% off, code SAVE_50',
  'discount 50 percent off, code SAVE-50',
  'quoted "acct" here',
  'Élan vital at café',
  'élan VITAL at CAFÉ',
  'ab',
  'naïve straße',
  '{"level":"error","msg":"db timeout","op":"select"}',
  '',
  'x'.repeat(300) + 'needle-at-the-end',
];

const QUERIES = [
  'acct-2231',
  'ACCT',
  'get /api',
  'declined',
  'valueerror',
  'File "app.py"',
  '50%',
  '_50',
  'SAVE_50',
  '"acct"',
  'élan',
  'ÉLAN',
  'café',
  'CAFÉ',
  'ab',
  'a',
  'STRASSE',
  'straße',
  '"level":"error"',
  'needle-at-the-end',
  'no such text anywhere',
  '%',
  '_',
  ' ',
];

/** SQLite's LIKE: ASCII letters fold, nothing else does; % and _ are escaped to themselves. */
const foldAscii = (text: string): string => text.replace(/[A-Z]/g, (c) => c.toLowerCase());
const likeMatches = (record: string, text: string): boolean =>
  foldAscii(record).includes(foldAscii(text));

function storeWith(texts: readonly string[], path = ':memory:'): MessageStore {
  const store = new MessageStore(path);
  cleanup.push(() => {
    store.close();
  });
  texts.forEach((raw, i) => {
    const entry = LogEntry.fromPartial({
      namespace: i % 2 === 0 ? 'shop' : 'payments',
      podName: `web-${String(i % 3)}`,
      container: 'app',
      timestamp: '1764547200123456789',
      level: i % 4 === 0 ? LogLevel.LOG_LEVEL_ERROR : LogLevel.LOG_LEVEL_INFO,
      message: raw.split('\n')[0] ?? '',
      raw: Buffer.from(raw),
    });
    store.insert(
      {
        messageId: `m-${String(i)}`,
        sessionId: 's-1',
        agentId: 'a',
        clusterId: 'c',
        kind: 'logs',
        receivedAt: received.receivedAt,
        summary: '',
        payload: new Uint8Array([1]),
      },
      logLinesOf(LogBatch.fromPartial({ entries: [entry] }), received),
    );
  });
  return store;
}

const rawOf = (store: MessageStore, filter: LogFilter, limit = 1000): string[] =>
  store.logs.query(filter, { limit }).lines.map((l) => l.raw);

describe('log store free-text search', () => {
  it('answers exactly what a case-insensitive (ASCII) LIKE over the whole record answers', () => {
    const store = storeWith(TEXTS);
    for (const text of QUERIES) {
      const expected = TEXTS.filter((record) => likeMatches(record, text));
      expect(rawOf(store, { text }), text).toEqual(expected);
      // With another filter, through the same index.
      const shopOnly = TEXTS.filter((record, i) => i % 2 === 0 && likeMatches(record, text));
      expect(rawOf(store, { text, namespace: 'shop' }), `${text} in shop`).toEqual(shopOnly);
    }
  });

  it('pages through the matches newest first, and follows after a cursor', () => {
    const texts = Array.from({ length: 50 }, (_, i) =>
      i % 3 === 0 ? `order ${String(i)} paid` : `order ${String(i)} pending`,
    );
    const store = storeWith(texts);
    const expected = texts.filter((t) => t.includes('paid'));
    const newest = store.logs.query({ text: 'PAID' }, { limit: 5 });
    expect(newest.lines.map((l) => l.message)).toEqual(expected.slice(-5));
    expect(newest.hasOlder).toBe(true);
    const older = store.logs.query({ text: 'PAID' }, { limit: 100, before: newest.lines[0]!.seq });
    expect(older.lines.map((l) => l.message)).toEqual(expected.slice(0, -5));
    expect(older.hasOlder).toBe(false);
    const after = store.logs.query({ text: 'paid' }, { limit: 100, after: older.lines[3]!.seq });
    expect(after.lines.map((l) => l.message)).toEqual(expected.slice(4));
  });

  it('reads a text of three or more characters through the trigram index, newest first, without a sort', () => {
    const store = storeWith(TEXTS);
    const plan = store.logs.plan({ text: 'acct-2231' }).join(' | ');
    expect(plan).toMatch(/VIRTUAL TABLE INDEX/);
    expect(plan).not.toMatch(/TEMP B-TREE/);
    // Two characters cannot use trigrams: the LIKE over log_lines, still newest first.
    expect(store.logs.plan({ text: 'ab' }).join(' | ')).not.toMatch(/VIRTUAL TABLE/);
  });

  it('scans newest first for a text in many records, with the same answer', () => {
    const texts = Array.from({ length: COMMON_TEXT_RECORDS + 10 }, (_, i) =>
      i % 500 === 1 ? `GET /api/rare/${String(i)}` : `GET /api/items/${String(i)} 200`,
    );
    const store = storeWith(texts);
    expect(store.logs.plan({ text: 'get /api' }).join(' | ')).not.toMatch(/VIRTUAL TABLE/);
    expect(store.logs.plan({ text: '/rare/' }).join(' | ')).toMatch(/VIRTUAL TABLE INDEX/);
    for (const text of ['get /api', '/rare/', 'items/20']) {
      expect(rawOf(store, { text }), text).toEqual(
        texts.filter((record) => likeMatches(record, text)).slice(-1000),
      );
    }
  });

  it('indexes the records of a store file written before the text index existed', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kubexa-log-text-'));
    cleanup.push(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const path = join(dir, 'demo.db');
    storeWith(TEXTS, path).close();
    const old = new Database(path);
    old.exec('DROP TABLE log_text');
    old.close();
    const reopened = new MessageStore(path);
    cleanup.push(() => {
      reopened.close();
    });
    expect(rawOf(reopened, { text: 'acct-2231' })).toEqual(
      TEXTS.filter((record) => likeMatches(record, 'acct-2231')),
    );
  });
});
