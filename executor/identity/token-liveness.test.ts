// The liveness probe never rejects: the minter's loop awaits it between refreshes, and a rejection
// there would end the executor. What https.request cannot even send is no verdict.
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { selfSubjectReviewProbe } from './token-liveness.js';

function kubeConfigFor(server: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: false }],
    users: [{ name: 'u', token: 'executor-token' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

describe('selfSubjectReviewProbe', () => {
  it('answers unknown, not a rejection, for a server https.request cannot reach', async () => {
    const plain = selfSubjectReviewProbe(kubeConfigFor('http://127.0.0.1:9'));
    const closed = selfSubjectReviewProbe(kubeConfigFor('https://127.0.0.1:9'));
    try {
      await expect(plain.check('t', new AbortController().signal)).resolves.toBe('unknown');
      await expect(closed.check('t', new AbortController().signal)).resolves.toBe('unknown');
    } finally {
      plain.close();
      closed.close();
    }
  });
});
