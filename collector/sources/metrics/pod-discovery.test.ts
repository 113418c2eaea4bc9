import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../../test/helpers/fake-clock.js';
import { captureLogs } from '../../../test/helpers/gateway-harness.js';
import { PodDiscovery, prometheusUrl, type RunningPod } from './pod-discovery.js';

const running = (
  annotations: Record<string, string>,
  ip = '10.1.2.3',
  ports: number[] = [],
): RunningPod => ({
  namespace: 'shop',
  name: 'web-1',
  ip,
  annotations,
  pod: {
    spec: {
      containers: [{ name: 'app', ports: ports.map((containerPort) => ({ containerPort })) }],
    },
  },
});

describe('prometheus.io annotations', () => {
  it.each([
    [
      { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9102' },
      'http://10.1.2.3:9102/metrics',
    ],
    [
      {
        'prometheus.io/scrape': 'True',
        'prometheus.io/port': '8443',
        'prometheus.io/scheme': 'https',
        'prometheus.io/path': 'stats',
      },
      'https://10.1.2.3:8443/stats',
    ],
    [{ 'prometheus.io/scrape': 'false', 'prometheus.io/port': '9102' }, undefined],
    [{ 'prometheus.io/port': '9102' }, undefined],
    [{ 'prometheus.io/scrape': 'true', 'prometheus.io/port': '99999' }, undefined],
  ])('%j → %s', (annotations, url) => {
    expect(prometheusUrl(running(annotations))).toBe(url);
  });

  it('falls back to the first declared container port, and brackets IPv6', () => {
    expect(prometheusUrl(running({ 'prometheus.io/scrape': 'true' }, 'fd00::7', [8080]))).toBe(
      'http://[fd00::7]:8080/metrics',
    );
  });

  it('keeps only Running pods with an IP that match pod_names', async () => {
    const pod = (name: string, phase: string, ip?: string): V1Pod => ({
      metadata: {
        name,
        namespace: 'shop',
        annotations: { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '1' },
      },
      status: { phase, ...(ip === undefined ? {} : { podIP: ip }) },
    });
    let applied: string[] = [];
    const discovery = new PodDiscovery(
      {
        what: 'prometheus',
        namespace: '',
        labelSelector: '',
        podNames: ['web-*'],
        refreshMs: 1000,
        targetsOf: (p) => [prometheusUrl(p) ?? ''],
        apply: (targets) => {
          applied = [...targets];
        },
      },
      {
        clock: new FakeClock(),
        logger: captureLogs().logger,
        lister: {
          list: () =>
            Promise.resolve([
              pod('web-1', 'Running', '10.0.0.1'),
              pod('web-2', 'Pending', '10.0.0.2'),
              pod('web-3', 'Running'),
              pod('api-1', 'Running', '10.0.0.4'),
            ]),
        },
      },
    );
    await discovery.refresh(new AbortController().signal);
    expect(applied).toEqual(['http://10.0.0.1:1/metrics']);
  });
});
