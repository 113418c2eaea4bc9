// The restart decisions: which previous instance is read to its end, and what follows its read.
// Also the store's side: a finished instance stays finished, and a version-1 database gains the
// flag without losing its checkpoints.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openCheckpointStore, type SavedCheckpoint } from './checkpoint-store.js';
import {
  misreadByStatus,
  misreadRecoveryFrom,
  misreadThrough,
  previousReadEnd,
  previousUnfinished,
} from './restart.js';

const empty: SavedCheckpoint = { position: undefined, intents: [] };
const at = { sec: 10, nanos: 5, count: 1 };

describe('previousUnfinished', () => {
  it('reads no previous instance before the first restart', () => {
    expect(previousUnfinished(0, { inProcess: { readToEnd: false }, saved: empty })).toBe(false);
  });

  it('reads an instance followed in this process until it was read to its end', () => {
    expect(previousUnfinished(1, { inProcess: { readToEnd: false }, saved: empty })).toBe(true);
    expect(previousUnfinished(3, { inProcess: { readToEnd: true }, saved: empty })).toBe(false);
  });

  it('reads an instance with a checkpoint or intents from an earlier run, unless finished', () => {
    const intents = [{ messageId: 'm', end: at }];
    expect(
      previousUnfinished(1, { inProcess: undefined, saved: { position: at, intents: [] } }),
    ).toBe(true);
    expect(
      previousUnfinished(1, { inProcess: undefined, saved: { position: undefined, intents } }),
    ).toBe(true);
    expect(
      previousUnfinished(1, {
        inProcess: undefined,
        saved: { position: at, intents, finished: true },
      }),
    ).toBe(false);
  });

  it('does not read an instance that was never followed', () => {
    expect(previousUnfinished(2, { inProcess: undefined, saved: empty })).toBe(false);
  });
});

describe('previousReadEnd', () => {
  const ended = { closedByUs: false, lines: 0, error: undefined, code: undefined };

  it('finishes a read that the server ended', () => {
    expect(previousReadEnd(ended)).toBe('finished');
    expect(previousReadEnd({ ...ended, lines: 7 })).toBe('finished');
  });

  it('finishes when there is no previous instance (400) or no pod (404)', () => {
    const error = new Error('x');
    expect(previousReadEnd({ ...ended, error, code: 400 })).toBe('finished');
    expect(previousReadEnd({ ...ended, error, code: 404 })).toBe('finished');
  });

  it('goes on from the position when closed by us, or cut after lines', () => {
    expect(previousReadEnd({ ...ended, closedByUs: true, lines: 3 })).toBe('again');
    expect(previousReadEnd({ ...ended, error: new Error('reset'), lines: 3 })).toBe('again');
  });

  it('backs off a request that failed before any line', () => {
    expect(previousReadEnd({ ...ended, error: new Error('boom'), code: 500 })).toBe('failed');
    expect(previousReadEnd({ ...ended, error: new Error('reset') })).toBe('failed');
  });
});

describe('a misread of the next instance (issue #5)', () => {
  const pos = (sec: number, nanos: number, count = 1) => ({ sec, nanos, count });

  it('is none when the previous read saw its position, or there is no position', () => {
    expect(misreadThrough({ readThrough: pos(10, 5), lastSeen: pos(10, 5) })).toBeUndefined();
    expect(misreadThrough({ readThrough: pos(10, 5), lastSeen: pos(11, 0) })).toBeUndefined();
    expect(misreadThrough({ readThrough: undefined, lastSeen: undefined })).toBeUndefined();
  });

  it('is through the position when the previous instance ended before it, or saw nothing', () => {
    expect(misreadThrough({ readThrough: pos(10, 5, 2), lastSeen: pos(10, 5) })).toEqual(
      pos(10, 5, 2),
    );
    expect(misreadThrough({ readThrough: pos(12, 0), lastSeen: undefined })).toEqual(pos(12, 0));
  });

  it('by the pod status: after the start second is misread, before it is not, in it only if the previous finished earlier', () => {
    const times = { previousFinishedSec: 9, startedSec: 10 };
    expect(misreadByStatus(pos(11, 0), times)).toBe('misread');
    expect(misreadByStatus(pos(10, 0), times)).toBe('misread');
    expect(misreadByStatus(pos(9, 0), times)).toBe('not misread');
    expect(misreadByStatus(pos(10, 0), { ...times, previousFinishedSec: 10 })).toBe('ambiguous');
    expect(misreadByStatus(pos(10, 0), { ...times, previousFinishedSec: undefined })).toBe(
      'ambiguous',
    );
    expect(misreadByStatus(pos(11, 0), { ...times, startedSec: undefined })).toBe('ambiguous');
  });

  it('reads the previous instance again from where the misread began, if it has lines after it', () => {
    const readThrough = pos(20, 3);
    const misreadFrom = pos(10, 3);
    expect(misreadRecoveryFrom({ misreadFrom, readThrough, lastSeen: pos(10, 4) })).toEqual(
      misreadFrom,
    );
    expect(misreadRecoveryFrom({ misreadFrom, readThrough, lastSeen: pos(10, 3) })).toBeUndefined();
    // Nothing seen from the second of readThrough: lines may lie between the two seconds.
    expect(misreadRecoveryFrom({ misreadFrom, readThrough, lastSeen: undefined })).toEqual(
      misreadFrom,
    );
    expect(
      misreadRecoveryFrom({ misreadFrom: pos(20, 1), readThrough, lastSeen: undefined }),
    ).toBeUndefined();
    expect(
      misreadRecoveryFrom({ misreadFrom: undefined, readThrough, lastSeen: pos(10, 4) }),
    ).toBeUndefined();
  });
});

describe('finished instances in the checkpoint store', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  const instance = { podUid: 'uid-1', container: 'app', restartCount: 0 };
  const meta = { namespace: 'ns', podName: 'pod' };

  it('keeps the flag across a reopen, and a late release does not clear it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'restart-'));
    dirs.push(dir);
    const path = join(dir, 'c.db');
    let store = openCheckpointStore(path, () => 0);
    store.advance([{ instance, meta, position: at, released: [] }]);
    expect(store.load(instance).finished).toBe(false);
    store.markFinished(instance, meta);
    store.markFinished({ ...instance, restartCount: 1 }, meta);
    store.advance([{ instance, meta, position: { ...at, count: 2 }, released: [] }]);
    store.close();
    store = openCheckpointStore(path, () => 0);
    expect(store.load(instance)).toMatchObject({ position: { ...at, count: 2 }, finished: true });
    expect(store.load({ ...instance, restartCount: 1 }).finished).toBe(true);
    expect(store.load({ ...instance, restartCount: 2 }).finished).toBe(false);
    store.close();
  });

  it('adds the flag to a version-1 database, keeping its checkpoints', () => {
    const dir = mkdtempSync(join(tmpdir(), 'restart-'));
    dirs.push(dir);
    const path = join(dir, 'c.db');
    const v1 = new Database(path);
    v1.exec(`
      CREATE TABLE checkpoints (
        pod_uid TEXT NOT NULL, container TEXT NOT NULL, restart_count INTEGER NOT NULL,
        namespace TEXT NOT NULL, pod_name TEXT NOT NULL,
        sec INTEGER NOT NULL, nanos INTEGER NOT NULL, count INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL, deleted_at_ms INTEGER,
        PRIMARY KEY (pod_uid, container, restart_count)
      );
      INSERT INTO checkpoints VALUES ('uid-1', 'app', 0, 'ns', 'pod', 10, 5, 1, 0, NULL);
    `);
    v1.pragma('user_version = 1');
    v1.close();
    const store = openCheckpointStore(path, () => 0);
    expect(store.load(instance)).toEqual({ position: at, intents: [], finished: false });
    store.markFinished(instance, meta);
    expect(store.load(instance).finished).toBe(true);
    store.close();
  });
});
