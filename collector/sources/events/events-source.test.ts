// The events source over a scripted pod watch (the shared watch hub with a ListWatch the test
// drives) and an owner lookup the test answers by hand: a pod's lifecycle transitions leave in
// the order they were found, even when resolving the first one's workload takes longer than the
// second's (a cold CI run received a Deployment pod's STARTED before its CREATED that way).
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { AgentMessage, podLifecycleReasonToJSON } from '../../../proto/index.js';
import { FakeClock } from '../../../test/helpers/fake-clock.js';
import { hang } from '../../../test/helpers/wait.js';
import type { KubeObject } from '../../watch/kube-list-watch.js';
import type { ListWatch } from '../../watch/list-watch.js';
import { WatchHub } from '../../watch/shared-watch.js';
import { createEventsSource } from './events-source.js';

const WAIT = { timeout: 10_000 };

const pod = (resourceVersion: string, status: Record<string, unknown>): KubeObject => ({
  metadata: {
    name: 'web-5d4f-x',
    namespace: 'ns',
    uid: 'u1',
    resourceVersion,
    ownerReferences: [{ kind: 'ReplicaSet', name: 'web-5d4f', controller: true }],
  },
  spec: { nodeName: 'node-1' },
  status,
});

interface Lookup {
  readonly path: string;
  answer(): void;
}

describe('events source', () => {
  it("sends a pod's transitions in the order found when the first workload lookup answers last", async () => {
    const lookups: Lookup[] = [];
    const http = {
      getJson: ({ path }: { path: string }): Promise<unknown> =>
        new Promise((resolve) => {
          lookups.push({
            path,
            answer: () => {
              resolve({
                metadata: {
                  ownerReferences: [
                    { kind: 'Deployment', name: 'web', apiVersion: 'apps/v1', controller: true },
                  ],
                },
              });
            },
          });
        }),
      getJsonIfChanged: (): Promise<never> =>
        Promise.reject(new Error('events discovery is not part of this test')),
      stream: (): Promise<void> => Promise.reject(new Error('the test watches through the hub')),
    };
    // The pod appears (CREATED), then runs (STARTED), in one watch after an empty list.
    const pods: ListWatch<KubeObject> = {
      list: () => Promise.resolve({ items: [], resourceVersion: '1' }),
      watch: (_rv, onEvent, signal) => {
        onEvent('ADDED', pod('2', { phase: 'Pending' }));
        onEvent(
          'MODIFIED',
          pod('3', {
            phase: 'Running',
            containerStatuses: [
              { name: 'app', restartCount: 0, state: { running: { startedAt: 'now' } } },
            ],
          }),
        );
        return hang(signal);
      },
    };
    const logger = pino({ level: 'silent' });
    const clock = new FakeClock();
    const sent: string[] = [];
    const events = createEventsSource(
      {
        events: { kubernetes_events: false, pod_lifecycle: true, exclude_namespaces: [] },
        identity: { clusterId: 'c', agentId: 'a' },
      },
      {
        logger,
        clock,
        http,
        sink: {
          enqueue: (item) => {
            const message = AgentMessage.decode(item.payload);
            if (message.payload?.$case === 'podLifecycle') {
              const { reason, workload } = message.payload.value;
              sent.push(`${podLifecycleReasonToJSON(reason)} ${workload?.name ?? ''}`);
            }
          },
        },
        watches: new WatchHub({ clock, logger, listWatch: () => pods }),
      },
    );
    events.setDelivery({ lifecycle: true, events: false });
    const stop = new AbortController();
    await events.start(stop.signal);
    try {
      // Answer the newest lookup first, each time, until both transitions have left.
      await expect
        .poll(() => {
          lookups.pop()?.answer();
          return sent.length;
        }, WAIT)
        .toBe(2);
      expect(sent).toEqual([
        'POD_LIFECYCLE_REASON_CREATED web',
        'POD_LIFECYCLE_REASON_STARTED web',
      ]);
    } finally {
      stop.abort();
      await events.close();
    }
  });
});
