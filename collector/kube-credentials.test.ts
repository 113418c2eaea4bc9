// The kubeconfig's request options on a fake clock, with a client certificate in a real file:
// asked of client-node at most once a second, shared by callers meanwhile, and a failed read
// never kept.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../test/helpers/fake-clock.js';
import { createKubeCredentials } from './kube-credentials.js';

let dir: string | undefined;
afterEach(async () => {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

async function kubeConfigWithCertFile(): Promise<{ kc: KubeConfig; certFile: string }> {
  dir = await mkdtemp(join(tmpdir(), 'kubexa-credentials-'));
  const certFile = join(dir, 'client.crt');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1', skipTLSVerify: false }],
    users: [{ name: 'u', certFile }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return { kc, certFile };
}

const certOf = async (options: Promise<{ cert?: unknown }>) => String((await options).cert);

describe('createKubeCredentials', () => {
  it('reads the files at most once a second and shares the answer', async () => {
    const { kc, certFile } = await kubeConfigWithCertFile();
    await writeFile(certFile, 'first');
    const clock = new FakeClock();
    const credentials = createKubeCredentials(kc, { clock });
    const a = credentials.options();
    expect(credentials.options()).toBe(a);
    expect(await certOf(a)).toBe('first');
    await writeFile(certFile, 'second');
    clock.advance(999);
    expect(await certOf(credentials.options())).toBe('first');
    clock.advance(1);
    expect(await certOf(credentials.options())).toBe('second');
  });

  it('keeps no failure: a file that was missing is read on the next call', async () => {
    const { kc, certFile } = await kubeConfigWithCertFile();
    const clock = new FakeClock();
    const credentials = createKubeCredentials(kc, { clock });
    await expect(credentials.options()).rejects.toThrow(/ENOENT/);
    await writeFile(certFile, 'now here');
    // The same instant on the clock: a kept failure would be answered again.
    expect(await certOf(credentials.options())).toBe('now here');
  });
});
