// The checkpoint store on a real SQLite file: checkpoints move forward only, whatever order the
// releases come in, and a release still forgets its intent.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openCheckpointStore } from './checkpoint-store.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempStore() {
  const dir = mkdtempSync(join(tmpdir(), 'kubexa-ckpt-store-'));
  dirs.push(dir);
  return openCheckpointStore(join(dir, 'pod-logs.db'), () => 0);
}

const instance = { podUid: 'uid-1', container: 'app', restartCount: 0 };
const meta = { namespace: 'ns', podName: 'pod' };

describe('CheckpointStore', () => {
  it('never moves a checkpoint back, by second, nanosecond or ordinal; a late release still forgets its intent', () => {
    const store = tempStore();
    const at = { sec: 100, nanos: 500, count: 3 };
    store.recordIntents([{ instance, meta, intent: { messageId: 'late', end: at } }]);
    store.advance([{ instance, meta, position: at, released: [] }]);
    for (const earlier of [
      { sec: 99, nanos: 999, count: 9 },
      { sec: 100, nanos: 499, count: 9 },
      { sec: 100, nanos: 500, count: 2 },
    ]) {
      store.advance([{ instance, meta, position: earlier, released: ['late'] }]);
      expect(store.load(instance)).toEqual({ position: at, intents: [], finished: false });
    }
    const later = { sec: 100, nanos: 500, count: 4 };
    store.advance([{ instance, meta, position: later, released: [] }]);
    expect(store.load(instance).position).toEqual(later);
    store.close();
  });
});
