// Readiness of the state source before any sync: not ready, and the reason names each rule's
// resource (an API server that does not answer keeps every watch unsynced).
import { createServer, type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { systemClock, type Clock } from '../../../shared/clock.js';
import { KubeHttp } from '../../watch/kube-http.js';
import { WatchHub } from '../../watch/shared-watch.js';
import { createStateSource } from './state-source.js';

function unreachable(server = 'https://127.0.0.1:1'): KubeConfig {
  const kube = new KubeConfig();
  kube.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'unused' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kube;
}

/** The source's options with one rule: `resources` in `namespace` ('' is every namespace). */
function oneRule(namespace: string, resources: string[]): Parameters<typeof createStateSource>[0] {
  return {
    state: {
      enabled: true,
      resync_period: 0,
      redact_secrets: false,
      rules: [{ id: 'a', namespace, resources, label_selector: '', field_selector: '' }],
    },
    identity: { clusterId: 'c', agentId: 'a' },
    secretsMetadataOnly: false,
  };
}

describe('state source readiness', () => {
  it('is not ready before the first sync and names every unsynced watch', async () => {
    const http = new KubeHttp(unreachable());
    const source = createStateSource(oneRule('shop', ['deployments', 'configmaps']), {
      logger: pino({ level: 'silent' }),
      clock: systemClock,
      sink: { enqueue: () => undefined },
      http,
    });
    await source.start(new AbortController().signal);
    try {
      expect(source.up()).toBe(false);
      expect(source.health()).toEqual({
        state: 'unhealthy',
        reason:
          'not synced: apps/v1/deployments (namespace shop); not synced: v1/configmaps (namespace shop)',
      });
    } finally {
      await source.close();
      http.close();
    }
  });

  it("releases the shared watches after a while when the first discovery hangs: the log source's pods still start", async () => {
    // An API server that accepts connections and never answers: discovery waits forever.
    const silent = createServer(() => undefined);
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const { port } = silent.address() as AddressInfo;
    const http = new KubeHttp(unreachable(`https://127.0.0.1:${String(port)}`));
    // Sleeps of the state source last at most 100 ms: the hold's cap passes at once.
    const hurried: Clock = {
      now: () => Date.now(),
      sleep: (ms, signal) => systemClock.sleep(Math.min(ms, 100), signal),
    };
    let lists = 0;
    const hub = new WatchHub({
      clock: systemClock,
      logger: pino({ level: 'silent' }),
      listWatch: () => ({
        list: () => {
          lists += 1;
          return new Promise(() => undefined);
        },
        watch: () => new Promise(() => undefined),
      }),
    });
    const source = createStateSource(oneRule('', ['pods']), {
      logger: pino({ level: 'silent' }),
      clock: hurried,
      sink: { enqueue: () => undefined },
      http,
      watches: hub,
    });
    // The log source's pods, subscribed while the state source holds the hub.
    const logs = new AbortController();
    void hub
      .feed(
        { group: '', version: 'v1', resource: 'pods', namespaced: true, namespace: '' },
        (o) => o,
      )
      .run(
        {
          replace: () => undefined,
          upsert: () => undefined,
          remove: () => undefined,
          forbidden: () => undefined,
        },
        logs.signal,
      );
    await source.start(new AbortController().signal);
    try {
      for (let i = 0; i < 100 && lists === 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(lists).toBe(1);
    } finally {
      logs.abort();
      await source.close();
      http.close();
      silent.close();
    }
  });
});
