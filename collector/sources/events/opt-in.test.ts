import { describe, expect, it } from 'vitest';
import type { ConfigSnapshot } from '../../../proto/index.js';
import { OPT_IN_EVENTS, OPT_IN_LIFECYCLE, PayloadOptIn } from './opt-in.js';

const watcher = (id: string): ConfigSnapshot['watchers'][number] => ({
  id,
  namespace: '',
  kinds: [],
  resyncSec: 0,
  resources: [],
});

describe('PayloadOptIn', () => {
  it('opts into nothing until a gateway says so', () => {
    expect(new PayloadOptIn().delivery()).toEqual({ lifecycle: false, events: false });
  });

  it('takes the handshake field: each payload kind by its AgentMessage field name', () => {
    const optIn = new PayloadOptIn();
    expect(optIn.onHandshake(['pod_lifecycle'])).toEqual({ lifecycle: true, events: false });
    expect(optIn.onHandshake(['kube_event', 'profile'])).toEqual({
      lifecycle: false,
      events: true,
    });
  });

  it('keeps the watcher-id opt-in of older gateways working', () => {
    const optIn = new PayloadOptIn();
    optIn.onHandshake([]);
    expect(optIn.onWatchers([watcher(OPT_IN_LIFECYCLE), watcher(OPT_IN_EVENTS)])).toEqual({
      lifecycle: true,
      events: true,
    });
    // An update without watchers (ingest rules only) changes nothing.
    expect(optIn.onWatchers([])).toEqual({ lifecycle: true, events: true });
    // Watchers without the ids withdraw the watcher opt-in, not the handshake's.
    optIn.onHandshake(['kube_event']);
    optIn.onWatchers([watcher(OPT_IN_LIFECYCLE)]);
    expect(optIn.onWatchers([watcher('deployments')])).toEqual({ lifecycle: false, events: true });
  });

  it('starts over at each handshake: a gateway that accepts nothing gets nothing', () => {
    const optIn = new PayloadOptIn();
    optIn.onHandshake(['pod_lifecycle', 'kube_event']);
    optIn.onWatchers([watcher(OPT_IN_LIFECYCLE)]);
    expect(optIn.onHandshake([])).toEqual({ lifecycle: false, events: false });
  });
});
