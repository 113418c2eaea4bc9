// startServices: started one after another, closed in reverse; a failed start closes what
// already started; one close that throws does not keep the others open.
import { describe, expect, it } from 'vitest';
import { startServices, type Service } from './service.js';

function recorder(): {
  events: string[];
  service: (name: string, fail?: 'start' | 'close') => Service;
} {
  const events: string[] = [];
  return {
    events,
    service: (name, fail) => ({
      name,
      start() {
        events.push(`start ${name}`);
        return fail === 'start'
          ? Promise.reject(new Error(`${name} cannot start`))
          : Promise.resolve();
      },
      close() {
        events.push(`close ${name}`);
        return fail === 'close'
          ? Promise.reject(new Error(`${name} cannot close`))
          : Promise.resolve();
      },
    }),
  };
}

describe('startServices', () => {
  it('starts in order and closes in reverse order', async () => {
    const { events, service } = recorder();
    const closeAll = await startServices(
      [service('a'), service('b'), service('c')],
      new AbortController().signal,
    );
    await closeAll();
    expect(events).toEqual(['start a', 'start b', 'start c', 'close c', 'close b', 'close a']);
  });

  it('closes what already started when a start fails, and rethrows that error', async () => {
    const { events, service } = recorder();
    await expect(
      startServices(
        [service('a'), service('b'), service('c', 'start'), service('d')],
        new AbortController().signal,
      ),
    ).rejects.toThrow('c cannot start');
    expect(events).toEqual(['start a', 'start b', 'start c', 'close b', 'close a']);
  });

  it('closes every service even when one close throws, then reports it', async () => {
    const { events, service } = recorder();
    const closeAll = await startServices(
      [service('a'), service('b', 'close'), service('c')],
      new AbortController().signal,
    );
    await expect(closeAll()).rejects.toThrow('services failed to close');
    expect(events.slice(3)).toEqual(['close c', 'close b', 'close a']);
  });
});
