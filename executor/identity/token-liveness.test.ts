// The liveness probe never rejects: the minter's loop awaits it between refreshes, and a rejection
// there would end the executor. What https.request cannot even send is no verdict.
import { describe, expect, it } from 'vitest';
import { singleClusterKubeConfig } from '../../test/helpers/kube.js';
import { selfSubjectReviewProbe } from './token-liveness.js';

const kubeConfigFor = (server: string) =>
  singleClusterKubeConfig({ server, token: 'executor-token', skipTLSVerify: false });

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
