// The informer's cache semantics over a scripted ListWatch: each change is emitted once; a relist
// re-sends nothing unchanged, synthesizes DELETED for what vanished and DELETED + ADDED for a
// same-name object with a new UID; a stop emits nothing.
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { FakeClock } from '../../test/helpers/fake-clock.js';
import { Informer, type Cached, type Change } from './informer.js';
import type { ListPage, ListWatch } from './list-watch.js';
import { hang } from '../../test/helpers/wait.js';

interface Item extends Cached {
  readonly note: string;
}

const item = (name: string, uid: string, resourceVersion: string): Item => ({
  key: `ns/${name}`,
  uid,
  resourceVersion,
  note: `${name}@${resourceVersion}`,
});

const WAIT = { timeout: 10_000 };

/** Lists and watches from queues; an exhausted queue hangs until the abort. */
class Script implements ListWatch<Item> {
  readonly lists: (() => ListPage<Item>)[] = [];
  readonly watches: ((onEvent: (type: string, object: Item) => void) => void)[] = [];
  list(signal: AbortSignal): Promise<ListPage<Item>> {
    const step = this.lists.shift();
    return step ? Promise.resolve().then(step) : hang(signal);
  }
  watch(_rv: string, onEvent: (type: string, object: Item) => void, signal: AbortSignal) {
    const step = this.watches.shift();
    return step
      ? Promise.resolve().then(() => {
          step(onEvent);
        })
      : hang(signal);
  }
}

const gone = (): never => {
  throw Object.assign(new Error('gone'), { code: 410 });
};

const describeChange = (c: Change<Item>): string =>
  `${c.type} ${c.object.note}${c.previous ? ` (was ${c.previous.note})` : ''}`;

describe('Informer', () => {
  it('emits each change once across a relist: unchanged nothing, vanished DELETED, new UID DELETED + ADDED', async () => {
    const api = new Script();
    const changes: string[] = [];
    api.lists.push(() => ({
      items: [item('a', 'u1', '1'), item('b', 'u2', '2'), item('c', 'u3', '3')],
      resourceVersion: '3',
    }));
    api.watches.push((onEvent) => {
      onEvent('MODIFIED', item('a', 'u1', '4'));
      // The same version again (a duplicate delivery): nothing.
      onEvent('MODIFIED', item('a', 'u1', '4'));
      onEvent('BOOKMARK', item('', '', '5'));
      gone();
    });
    // While away: b deleted, c recreated with a new UID, d created; a unchanged.
    api.lists.push(() => ({
      items: [item('a', 'u1', '4'), item('c', 'u9', '7'), item('d', 'u4', '8')],
      resourceVersion: '8',
    }));
    api.watches.push((onEvent) => {
      onEvent('DELETED', item('d', 'u4', '9'));
    });
    const signal = new AbortController();
    const informer = new Informer(api, {
      name: 'test',
      clock: new FakeClock(),
      logger: pino({ level: 'silent' }),
      onChange: (c) => changes.push(describeChange(c)),
    });
    const running = informer.run(signal.signal);
    await vi.waitFor(() => {
      expect(changes.at(-1)).toBe('DELETED d@9');
    }, WAIT);
    expect(changes).toEqual([
      'ADDED a@1',
      'ADDED b@2',
      'ADDED c@3',
      'MODIFIED a@4 (was a@1)',
      'DELETED c@3',
      'ADDED c@7',
      'ADDED d@8',
      'DELETED b@2',
      'DELETED d@9',
    ]);
    expect(informer.synced()).toBe(true);
    expect([...informer.values()].map((i) => i.note).sort()).toEqual(['a@4', 'c@7']);
    signal.abort();
    await running;
    // Stopping emits nothing (no DELETED for what was cached).
    expect(changes).toHaveLength(9);
  });

  it('reports the refused verb and is not synced while forbidden', async () => {
    const api = new Script();
    api.lists.push(() => {
      throw Object.assign(new Error('forbidden'), { code: 403 });
    });
    const forbidden: string[] = [];
    const clock = new FakeClock();
    const informer = new Informer(api, {
      name: 'test',
      clock,
      logger: pino({ level: 'silent' }),
      onChange: () => undefined,
      onForbidden: (_err, verb) => forbidden.push(verb),
    });
    const signal = new AbortController();
    const running = informer.run(signal.signal);
    await clock.waitForSleep(() => true);
    expect(forbidden).toEqual(['list']);
    expect(informer.forbidden()?.verb).toBe('list');
    expect(informer.synced()).toBe(false);
    signal.abort();
    await running;
  });
});
