// Whether the API server still accepts the collector's minted token. The token dies before its
// expiry when its binding Secret is deleted or replaced (someone cleaning up Secrets, a restore of
// the namespace): the API server refuses it from then on, and without this check the collector
// would stay locked out until the minter's next refresh, up to 8 minutes later. The executor may
// not read or watch Secrets, so it asks the API server about the token itself: a
// SelfSubjectReview, which every authenticated identity may create (system:basic-user), sent with
// the collector's token. No new grant, one small request per check.
import { Agent as HttpsAgent, request as httpsRequest, type RequestOptions } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import {
  sameTlsMaterial,
  tlsAgentOptions,
  tlsMaterial,
  type TlsMaterial,
} from '../../shared/tls-context.js';

/** alive: the API server authenticated it; refused: 401; unknown: anything else (no verdict). */
export type TokenVerdict = 'alive' | 'refused' | 'unknown';

export interface TokenLivenessProbe {
  /** Asks about one token; never throws (an unreachable API server is `unknown`). */
  check(token: string, signal: AbortSignal): Promise<TokenVerdict>;
  /** Closes the kept-alive connection and destroys the agent. */
  close(): void;
}

const REVIEW_PATH = '/apis/authentication.k8s.io/v1/selfsubjectreviews';
const REVIEW_BODY = JSON.stringify({
  apiVersion: 'authentication.k8s.io/v1',
  kind: 'SelfSubjectReview',
});
/** A check that takes longer than this gives no verdict; the next one comes at its interval. */
const PROBE_TIMEOUT_MS = 10_000;

/**
 * A probe that reaches the API server of `kc` (its CA and server name; the executor's own
 * credentials are never sent) and authenticates with nothing but the token under test.
 */
export function selfSubjectReviewProbe(kc: KubeConfig): TokenLivenessProbe {
  const cluster = kc.getCurrentCluster();
  if (cluster === null) throw new Error('the kubeconfig has no current cluster');
  const url = new URL(REVIEW_PATH, cluster.server);
  let current: { readonly material: TlsMaterial; readonly agent: HttpsAgent } | undefined;

  /**
   * The agent of this TLS material. client-node reads the CA file on every call, but an agent
   * verifies every later connection with the CA it was built with: after a CA rotation (the
   * service account's ca.crt or the kubeconfig rewritten) the old agent would refuse the API
   * server's new certificate at every check. New material: a new agent, the old one destroyed
   * (its kept-alive connection too; checks run one at a time).
   */
  const agentFor = (material: TlsMaterial): HttpsAgent => {
    if (current !== undefined && sameTlsMaterial(current.material, material)) {
      return current.agent;
    }
    current?.agent.destroy();
    // keepAlive: a check every few seconds resumes the same connection instead of a handshake.
    const agent = new HttpsAgent({ ...tlsAgentOptions(material), keepAlive: true, maxSockets: 1 });
    current = { material, agent };
    return agent;
  };

  const check = async (token: string, signal: AbortSignal): Promise<TokenVerdict> => {
    const tls: RequestOptions = {};
    try {
      await kc.applyToHTTPSOptions(tls);
    } catch {
      return 'unknown';
    }
    // The CA, server name and verification setting only: the executor's own client certificate
    // and key stay out of it, as its token does.
    const agent = agentFor({ ...tlsMaterial(tls), cert: undefined, key: undefined });
    return new Promise<TokenVerdict>((resolve) => {
      // https.request throws at once on what it cannot send (an http:// server in a hand-written
      // kubeconfig): no verdict, as promised, never a rejection the minter's loop would not catch.
      let call: ReturnType<typeof httpsRequest>;
      try {
        call = httpsRequest(url, {
          method: 'POST',
          agent,
          timeout: PROBE_TIMEOUT_MS,
          signal,
          headers: {
            // Only the token under test: the executor's own headers are not copied.
            authorization: `Bearer ${token}`,
            accept: 'application/json',
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(REVIEW_BODY),
          },
        });
      } catch {
        resolve('unknown');
        return;
      }
      call.on('timeout', () => call.destroy(new Error('timed out')));
      call.on('error', () => {
        resolve('unknown');
      });
      call.on('response', (response) => {
        response.resume();
        const status = response.statusCode ?? 0;
        resolve(status === 401 ? 'refused' : status >= 200 && status < 300 ? 'alive' : 'unknown');
      });
      call.end(REVIEW_BODY);
    });
  };
  return {
    check,
    close() {
      current?.agent.destroy();
      current = undefined;
    },
  };
}
