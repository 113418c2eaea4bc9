// An idle collector's CPU: its periodic API requests (metrics.k8s.io scrapes every 30 s, the
// kubelet's /readyz probes, workload owner lookups) each go over one TLS agent per client, so
// after the first request the TLS session is resumed instead of a new TLS context and a full
// handshake per request (what client-node's typed clients did). Counted on a real HTTPS server
// with the test CA: how many handshakes were full and how many resumed.
import { once } from 'node:events';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { TLS_FIXTURES } from '../../test/helpers/gateway-harness.js';
import { createClusterProbe } from '../collector.js';
import { kubeMetricsApi } from '../sources/metrics/metrics-api.js';
import { kubePodLogAccess } from '../sources/pod-logs/kube-access.js';

const REQUESTS = 4;

interface ApiServer {
  readonly kube: KubeConfig;
  readonly handshakes: { full: number; resumed: number };
  readonly paths: string[];
}

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  }
});

async function startApiServer(): Promise<ApiServer> {
  const handshakes = { full: 0, resumed: 0 };
  const paths: string[] = [];
  const server = createServer({ cert: TLS_FIXTURES.cert, key: TLS_FIXTURES.key }, (req, res) => {
    paths.push(req.url ?? '');
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ items: [], metadata: { uid: 'u' } }));
  });
  server.on('secureConnection', (socket: TLSSocket) => {
    if (socket.isSessionReused()) handshakes.resumed++;
    else handshakes.full++;
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const kube = new KubeConfig();
  kube.loadFromOptions({
    clusters: [
      { name: 'c', server: `https://127.0.0.1:${String(port)}`, caFile: TLS_FIXTURES.caPath },
    ],
    users: [{ name: 'u', token: 'token-0123456789' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return { kube, handshakes, paths };
}

describe('periodic API requests resume their TLS session', () => {
  it('metrics.k8s.io scrapes: one full handshake, then resumed sessions', async () => {
    const api = await startApiServer();
    const metrics = kubeMetricsApi(api.kube);
    const signal = new AbortController().signal;
    for (let i = 0; i < REQUESTS; i++) await metrics.listNodeMetrics(signal);
    expect(api.paths).toHaveLength(REQUESTS);
    expect(api.handshakes).toEqual({ full: 1, resumed: REQUESTS - 1 });
  });

  it("the readiness probe of API access (the kubelet's /readyz): one full handshake", async () => {
    const api = await startApiServer();
    const probe = createClusterProbe(api.kube);
    for (let i = 0; i < REQUESTS; i++) await probe.listOneNamespace();
    expect(api.paths).toEqual(Array(REQUESTS).fill('/api/v1/namespaces?limit=1'));
    expect(api.handshakes).toEqual({ full: 1, resumed: REQUESTS - 1 });
  });

  it('workload owner lookups of the pod log source: one full handshake', async () => {
    const api = await startApiServer();
    const { owners } = kubePodLogAccess(api.kube);
    for (let i = 0; i < REQUESTS; i++) {
      await owners('ReplicaSet', 'shop', `web-${String(i)}`, new AbortController().signal);
    }
    expect(api.paths[0]).toBe('/apis/apps/v1/namespaces/shop/replicasets/web-0');
    expect(api.handshakes).toEqual({ full: 1, resumed: REQUESTS - 1 });
  });
});
