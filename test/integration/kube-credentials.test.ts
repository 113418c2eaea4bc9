// The live query's HTTPS client (collector/query/kube-rest.ts) against the real API server,
// through a TCP forwarder the test owns so it can count the connections the client opens. The
// kubeconfig's CA, certificate and key are files of the test's own, so it can replace one; the
// client's clock is a fake, so "at most once a second" is counted, not timed.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, inject, it } from 'vitest';
import { createKubeRest } from '../../collector/query/kube-rest.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { loadKubeConfig } from '../helpers/kube.js';
import { startTcpForwarder } from '../helpers/tcp-proxy.js';

async function fileOrData(file: string | undefined, data: string | undefined): Promise<Buffer> {
  if (file !== undefined && file !== '') return readFile(file);
  if (data !== undefined && data !== '') return Buffer.from(data, 'base64');
  throw new Error('the harness kubeconfig has neither a file nor data for a TLS item');
}

describe("the live query's HTTPS client", () => {
  it('reads the TLS files at most once a second and keeps one TLS connection for many queries', async () => {
    const kc = loadKubeConfig(inject('kubeconfigPath'));
    const cluster = kc.getCurrentCluster();
    const user = kc.getCurrentUser();
    if (cluster === null || user === null) throw new Error('the kubeconfig has no current context');
    const dir = await mkdtemp(join(tmpdir(), 'kubexa-credentials-'));
    const files = {
      ca: join(dir, 'ca.crt'),
      cert: join(dir, 'client.crt'),
      key: join(dir, 'client.key'),
    };
    const key = await fileOrData(
      user.certFile === undefined ? undefined : user.keyFile,
      user.keyData,
    );
    await writeFile(files.ca, await fileOrData(cluster.caFile, cluster.caData));
    await writeFile(files.cert, await fileOrData(user.certFile, user.certData));
    await writeFile(files.key, key);
    const upstream = new URL(cluster.server);
    const forwarder = await startTcpForwarder(upstream.hostname, Number(upstream.port || 443));
    const via = new KubeConfig();
    via.loadFromOptions({
      clusters: [
        {
          name: 'via',
          server: `https://127.0.0.1:${String(forwarder.port)}`,
          caFile: files.ca,
          skipTLSVerify: false,
          ...(cluster.tlsServerName === undefined ? {} : { tlsServerName: cluster.tlsServerName }),
        },
      ],
      users: [{ name: 'via', certFile: files.cert, keyFile: files.key }],
      contexts: [{ name: 'via', cluster: 'via', user: 'via' }],
      currentContext: 'via',
    });
    const clock = new FakeClock();
    const rest = createKubeRest(via, { clock });
    const get = async () =>
      (
        await rest.request({
          method: 'GET',
          path: '/api/v1/namespaces/default',
          maxBodyBytes: 1 << 20,
          signal: AbortSignal.timeout(10_000),
        })
      ).status;
    try {
      // 40 queries one after another, 20 of them a second apart on the client's clock: one
      // connection carries them all (the agent is kept while the TLS material stays the same).
      for (let i = 0; i < 40; i++) {
        if (i > 0 && i % 2 === 0) clock.advance(1_000);
        expect(await get()).toBe(200);
      }
      expect(forwarder.accepted()).toBe(1);
      // The key file is replaced by something that is not a key. Within the same second the
      // queries use the material read before (a query that read the file would fail).
      await writeFile(files.key, 'not a key\n');
      for (let i = 0; i < 5; i++) expect(await get()).toBe(200);
      expect(forwarder.accepted()).toBe(1);
      // A second later the files are read again: the new (broken) key is used, so a rotated
      // certificate is picked up within a second.
      clock.advance(1_000);
      await expect(get()).rejects.toThrow(/DECODER|unsupported|key/i);
      await writeFile(files.key, key);
      clock.advance(1_000);
      expect(await get()).toBe(200);
    } finally {
      rest.close();
      await forwarder.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
