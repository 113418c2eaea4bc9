// The reflector against a scripted ListWatch and the fake clock: lists page by page (an expired
// continue token starts the list over), a 410 relists at once, a 403 is reported once per episode
// with the refused verb and retried only at the maximum backoff, other errors back off 1 s
// doubling to 30 s and reset after a watch that made progress.
import type { V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FakeClock } from '../../test/helpers/fake-clock.js';
import type { ListOptions, ListPage, ListWatch } from './list-watch.js';
import { MAX_BACKOFF_MS, runReflector, type ReflectorHandlers } from './reflector.js';
import { hang } from '../../test/helpers/wait.js';

type PodListWatch = ListWatch<V1Pod>;
type PodReflectorHandlers = ReflectorHandlers<V1Pod>;
/** Every vi.waitFor here gets this explicit budget (the default 1 s flakes on a loaded machine). */
const WAIT = { timeout: 10_000 };

const logger = pino({ level: 'silent' });

type ListStep = (options?: ListOptions) => ListPage<V1Pod>;
type WatchStep = (resourceVersion: string, onEvent: (type: string, pod: V1Pod) => void) => void;

const failure = (code: number): Error =>
  Object.assign(new Error(`status ${String(code)}`), { code });

function pod(name: string, resourceVersion: string): V1Pod {
  return { metadata: { name, uid: name, resourceVersion } };
}

/** Answers lists and watches from scripts; an exhausted script hangs until the abort. */
class ScriptedApi implements PodListWatch {
  readonly lists: ListStep[] = [];
  readonly watches: WatchStep[] = [];
  listCalls = 0;
  readonly watchedFrom: string[] = [];
  readonly continues: (string | undefined)[] = [];

  list(signal: AbortSignal, options?: ListOptions): Promise<ListPage<V1Pod>> {
    this.listCalls++;
    this.continues.push(options?.continue);
    const step = this.lists.shift();
    if (!step) return hang(signal);
    return Promise.resolve().then(() => step(options));
  }

  watch(
    resourceVersion: string,
    onEvent: (type: string, object: V1Pod) => void,
    signal: AbortSignal,
  ): Promise<void> {
    this.watchedFrom.push(resourceVersion);
    const step = this.watches.shift();
    if (!step) return hang(signal);
    return Promise.resolve().then(() => {
      step(resourceVersion, onEvent);
    });
  }
}

function recorder() {
  const calls: string[] = [];
  const handlers: PodReflectorHandlers = {
    replace: (pods) => calls.push(`replace:${pods.map((p) => p.metadata?.name).join(',')}`),
    upsert: (p) => calls.push(`upsert:${p.metadata?.name ?? ''}`),
    remove: (p) => calls.push(`remove:${p.metadata?.name ?? ''}`),
    forbidden: (_err, verb) => calls.push(`forbidden:${verb}`),
  };
  return { calls, handlers };
}

const controllers: AbortController[] = [];
afterEach(() => {
  for (const c of controllers.splice(0)) c.abort();
});

function start(api: ScriptedApi, handlers: PodReflectorHandlers, clock: FakeClock) {
  const controller = new AbortController();
  controllers.push(controller);
  const done = runReflector(api, handlers, {
    clock,
    logger,
    signal: controller.signal,
    random: () => 0.5, // jitter factor exactly 1
  });
  return { controller, done };
}

describe('runReflector', () => {
  it('lists, watches from the list version, applies events, and relists on a 410 without backoff', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi();
    const { calls, handlers } = recorder();
    api.lists.push(() => ({ items: [pod('a', '5')], resourceVersion: '10' }));
    api.watches.push((_rv, onEvent) => {
      onEvent('ADDED', pod('b', '11'));
      onEvent('BOOKMARK', pod('', '12'));
      onEvent('MODIFIED', pod('a', '13'));
      onEvent('DELETED', pod('b', '14'));
    });
    // Watch from 14 (the last event's version), then the server says the version is gone.
    api.watches.push(() => {
      throw failure(410);
    });
    api.lists.push(() => ({ items: [pod('a', '20')], resourceVersion: '30' }));
    // An ERROR event (a 410 inside the stream) also relists.
    api.watches.push((_rv, onEvent) => {
      onEvent('ERROR', pod('', ''));
    });
    api.lists.push(() => ({ items: [], resourceVersion: '40' }));
    const { controller, done } = start(api, handlers, clock);
    await vi.waitFor(() => {
      expect(api.watchedFrom).toEqual(['10', '14', '30', '40']);
    }, WAIT);
    expect(calls).toEqual([
      'replace:a',
      'upsert:b',
      'upsert:a',
      'remove:b',
      'replace:a',
      'replace:',
    ]);
    expect(api.listCalls).toBe(3);
    expect(clock.sleeps).toEqual([]);
    controller.abort();
    await done;
  });

  it('reports a 403 once per episode and retries it only at the maximum backoff, never in a loop', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi();
    const { calls, handlers } = recorder();
    for (let i = 0; i < 3; i++) {
      api.lists.push(() => {
        throw failure(403);
      });
    }
    api.lists.push(() => ({ items: [pod('a', '1')], resourceVersion: '2' }));
    api.watches.push(() => {
      throw failure(403);
    });
    const { controller, done } = start(api, handlers, clock);
    for (let attempt = 1; attempt <= 3; attempt++) {
      await clock.waitForSleep(() => clock.sleeps.length === attempt);
      expect(api.listCalls).toBe(attempt);
      clock.advance(MAX_BACKOFF_MS);
    }
    await vi.waitFor(() => {
      expect(calls).toEqual(['forbidden:list', 'replace:a', 'forbidden:watch']);
    }, WAIT);
    // The 403 from the watch after a successful list is a new episode; it relists after 30 s.
    await clock.waitForSleep(() => clock.sleeps.length === 4);
    expect(clock.sleeps).toEqual([MAX_BACKOFF_MS, MAX_BACKOFF_MS, MAX_BACKOFF_MS, MAX_BACKOFF_MS]);
    expect(api.listCalls).toBe(4);
    clock.advance(MAX_BACKOFF_MS);
    await vi.waitFor(() => {
      expect(api.listCalls).toBe(5);
    }, WAIT);
    controller.abort();
    await done;
    expect(calls.filter((c) => c.startsWith('forbidden'))).toHaveLength(2);
  });

  it('backs off other errors 1 s doubling to 30 s, and resets after a watch that made progress', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi();
    const { handlers } = recorder();
    const failures = 7;
    for (let i = 0; i < failures; i++) {
      api.lists.push(() => {
        throw failure(500);
      });
    }
    api.lists.push(() => ({ items: [], resourceVersion: '1' }));
    // A watch that delivered an event and ended normally, then a broken connection.
    api.watches.push((_rv, onEvent) => {
      onEvent('ADDED', pod('a', '2'));
    });
    api.watches.push(() => {
      throw new Error('socket hang up');
    });
    const { controller, done } = start(api, handlers, clock);
    for (let n = 1; n <= failures; n++) {
      await clock.waitForSleep(() => clock.sleeps.length === n);
      clock.advance(MAX_BACKOFF_MS);
    }
    await clock.waitForSleep(() => clock.sleeps.length === failures + 1);
    expect(clock.sleeps).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 1_000]);
    // The watch after the backoff resumes from the last version, without a relist.
    clock.advance(1_000);
    await vi.waitFor(() => {
      expect(api.watchedFrom).toEqual(['1', '2', '2']);
    }, WAIT);
    expect(api.listCalls).toBe(failures + 1);
    controller.abort();
    await done;
  });

  it('stops when the signal aborts, during a backoff or a watch', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi();
    api.lists.push(() => {
      throw failure(500);
    });
    const backingOff = start(api, recorder().handlers, clock);
    await clock.waitForSleep(() => true);
    backingOff.controller.abort();
    // Resolves (a reflector that kept running would fail this by the test's timeout).
    await expect(backingOff.done).resolves.toBeUndefined();
    expect(api.listCalls).toBe(1);
    // During a watch the server keeps open (the script is exhausted: it hangs until the abort).
    api.lists.push(() => ({ items: [pod('a', '1')], resourceVersion: '1' }));
    const { calls, handlers } = recorder();
    const watching = start(api, handlers, clock);
    await vi.waitFor(() => {
      expect(api.watchedFrom).toEqual(['1']);
    }, WAIT);
    watching.controller.abort();
    await expect(watching.done).resolves.toBeUndefined();
    expect(calls).toEqual(['replace:a']);
    expect(api.listCalls).toBe(2);
  });

  it('lists page by page with the continue token, and starts over once when a token expires', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi();
    const { calls, handlers } = recorder();
    api.lists.push(() => ({ items: [pod('a', '1')], resourceVersion: '9', continue: 'page2' }));
    // The continue token expired (the server compacted past it): the whole list again.
    api.lists.push(() => {
      throw failure(410);
    });
    api.lists.push(() => ({ items: [pod('a', '1')], resourceVersion: '20', continue: 'next' }));
    api.lists.push(() => ({ items: [pod('b', '2')], resourceVersion: '20' }));
    const { controller, done } = start(api, handlers, clock);
    await vi.waitFor(() => {
      expect(api.watchedFrom).toEqual(['20']);
    }, WAIT);
    expect(api.continues).toEqual([undefined, 'page2', undefined, 'next']);
    // One replace with every page's objects; the failed attempt's first page never reached it.
    expect(calls).toEqual(['replace:a,b']);
    expect(clock.sleeps).toEqual([]);
    controller.abort();
    await done;
  });
});
