// Readiness of the state source before any sync: not ready, and the reason names each rule's
// resource (an API server that does not answer keeps every watch unsynced).
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../../shared/clock.js';
import { KubeHttp } from '../../watch/kube-http.js';
import { createStateSource } from './state-source.js';

function unreachable(): KubeConfig {
  const kube = new KubeConfig();
  kube.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1', skipTLSVerify: true }],
    users: [{ name: 'u', token: 'unused' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kube;
}

describe('state source readiness', () => {
  it('is not ready before the first sync and names every unsynced watch', async () => {
    const http = new KubeHttp(unreachable());
    const source = createStateSource(
      {
        state: {
          enabled: true,
          resync_period: 0,
          redact_secrets: false,
          rules: [
            {
              id: 'a',
              namespace: 'shop',
              resources: ['deployments', 'configmaps'],
              label_selector: '',
              field_selector: '',
            },
          ],
        },
        identity: { clusterId: 'c', agentId: 'a' },
        secretsMetadataOnly: false,
      },
      {
        logger: pino({ level: 'silent' }),
        clock: systemClock,
        sink: { enqueue: () => undefined },
        http,
      },
    );
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
});
