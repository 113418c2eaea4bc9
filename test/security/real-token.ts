// Requests as one identity, with nothing but its bearer token: raw HTTPS (WebSocket upgrades
// included) and SelfSubjectRulesReview, for the tests that prove what each identity may do.
import { randomBytes } from 'node:crypto';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { AuthorizationV1Api, KubeConfig } from '@kubernetes/client-node';

/** A client that authenticates with nothing but the given bearer token. */
export function kubeConfigForToken(admin: KubeConfig, token: string): KubeConfig {
  const cluster = admin.getCurrentCluster();
  if (cluster === null) throw new Error('kubeconfig has no current cluster');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ ...cluster, name: 'c' }],
    users: [{ name: 'u', token }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

/** One raw HTTPS request as the token's identity; resolves the HTTP status. */
export async function statusAs(
  kc: KubeConfig,
  method: string,
  path: string,
  options: { body?: unknown; headers?: Record<string, string> } = {},
): Promise<number> {
  const server = kc.getCurrentCluster()?.server ?? '';
  const https: RequestOptions = {};
  await kc.applyToHTTPSOptions(https);
  const url = new URL(path, server);
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      {
        ...https,
        method,
        headers: {
          ...(https.headers as Record<string, string> | undefined),
          ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
          ...options.headers,
        },
      },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve(res.statusCode ?? 101);
    });
    req.on('error', reject);
    req.end(options.body === undefined ? undefined : JSON.stringify(options.body));
  });
}

export const websocketHeaders = () => ({
  connection: 'Upgrade',
  upgrade: 'websocket',
  'sec-websocket-version': '13',
  'sec-websocket-key': randomBytes(16).toString('base64'),
  'sec-websocket-protocol': 'v5.channel.k8s.io',
});

/** SelfSubjectRulesReview in a namespace, normalised to sorted "group/resource[names]:verb". */
export async function rulesOf(kc: KubeConfig, namespace: string): Promise<string[]> {
  const review = await kc.makeApiClient(AuthorizationV1Api).createSelfSubjectRulesReview({
    body: {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SelfSubjectRulesReview',
      spec: { namespace },
    },
  });
  const out = new Set<string>();
  for (const rule of review.status?.resourceRules ?? []) {
    const names = rule.resourceNames?.length ? `[${[...rule.resourceNames].sort().join(',')}]` : '';
    for (const group of rule.apiGroups ?? [])
      for (const resource of rule.resources ?? [])
        for (const verb of rule.verbs) out.add(`${group}/${resource}${names}:${verb}`);
  }
  for (const rule of review.status?.nonResourceRules ?? []) {
    for (const url of rule.nonResourceURLs ?? [])
      for (const verb of rule.verbs) out.add(`url:${url}:${verb}`);
  }
  return [...out].sort();
}
