// The shared watch over a scripted ListWatch: users of one target share its list and watch, each
// through its own transform into its own cache; a user joining a running watch gets a full list
// (the watch is restarted) while the first user's cache re-sends nothing; a held hub starts
// nothing until released; the last user leaving ends the watch.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/helpers/fake-clock.js';
import { hang } from '../../test/helpers/wait.js';
import { Informer, type Cached, type Change } from './informer.js';
import type { KubeObject, WatchTarget } from './kube-list-watch.js';
import type { ListWatch } from './list-watch.js';
import { WatchHub } from './shared-watch.js';

const WAIT = { timeout: 10_000 };
const PODS: WatchTarget = {
  group: '',
  version: 'v1',
  resource: 'pods',
  namespaced: true,
  namespace: '',
};

interface Item extends Cached {
  readonly seenBy: string;
}

/** One pod listed; every watch hangs until aborted; counts lists and running watches. */
function script() {
  const counts = { lists: 0, watching: 0 };
  const api: ListWatch<KubeObject> = {
    list: () => {
      counts.lists++;
      return Promise.resolve({
        items: [{ metadata: { name: 'a', namespace: 'ns', uid: 'u1', resourceVersion: '1' } }],
        resourceVersion: '1',
      });
    },
    watch: async (_rv, _onEvent, signal) => {
      counts.watching++;
      try {
        await hang(signal);
      } finally {
        counts.watching--;
      }
    },
  };
  return { api, counts };
}

function user(hub: WatchHub, name: string) {
  const changes: string[] = [];
  const informer = new Informer<Item>(
    hub.feed(PODS, (object) => ({
      key: `${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`,
      uid: object.metadata?.uid ?? '',
      resourceVersion: object.metadata?.resourceVersion ?? '',
      seenBy: name,
    })),
    {
      name,
      clock: new FakeClock(),
      logger: pino({ level: 'silent' }),
      onChange: (change: Change<Item>) =>
        changes.push(`${change.type} ${change.object.key} ${change.object.seenBy}`),
    },
  );
  const stop = new AbortController();
  const done = informer.run(stop.signal);
  return { informer, changes, stop, done };
}

describe('WatchHub', () => {
  it('shares one watch per target; a joining user relists it without re-sending to the first', async () => {
    const { api, counts } = script();
    const hub = new WatchHub({
      clock: new FakeClock(),
      logger: pino({ level: 'silent' }),
      listWatch: () => api,
    });
    const first = user(hub, 'first');
    await expect.poll(() => first.informer.synced() && counts.watching, WAIT).toBe(1);
    const second = user(hub, 'second');
    await expect.poll(() => second.informer.synced() && counts.watching, WAIT).toBe(1);
    expect(counts.lists).toBe(2);
    expect(first.changes).toEqual(['ADDED ns/a first']);
    expect(second.changes).toEqual(['ADDED ns/a second']);
    second.stop.abort();
    await second.done;
    expect(counts.watching).toBe(1);
    first.stop.abort();
    await first.done;
    await expect.poll(() => counts.watching, WAIT).toBe(0);
  });

  it('starts nothing while held: the users known by the release share the first list', async () => {
    const { api, counts } = script();
    const hub = new WatchHub({
      clock: new FakeClock(),
      logger: pino({ level: 'silent' }),
      listWatch: () => api,
    });
    const release = hub.hold();
    const first = user(hub, 'first');
    const second = user(hub, 'second');
    await new Promise((resolve) => setImmediate(resolve));
    expect(counts.lists).toBe(0);
    release();
    await expect.poll(() => first.informer.synced() && second.informer.synced(), WAIT).toBe(true);
    expect(counts.lists).toBe(1);
    first.stop.abort();
    second.stop.abort();
    await Promise.all([first.done, second.done]);
  });
});
