// The KubeConfig's request options (TLS material, Authorization header, basic auth), asked of
// client-node at most once a `maxAgeMs` and shared by the requests in between. client-node 1.4's
// applyToHTTPSOptions reads the CA, client certificate and key files with readFileSync on every
// call and builds a new https.Agent each time; asked per request, that is three synchronous file
// reads on the event loop per query. Asked at most once a second, a rotated certificate file is
// still picked up within a second, and a rotated ServiceAccount token as before: client-node's
// FileAuth reads the token file again on the first call 60 s after its last read, so the cache
// delays that by at most `maxAgeMs`. The same bound holds for a token an exec plugin or OIDC
// provider hands out: a request made in the second after that token expired may still carry it
// and be refused (401), and the next second's requests carry the refreshed one.
import type https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { systemClock, type Clock } from '../shared/clock.js';

/** How long one answer of applyToHTTPSOptions is used. */
export const CREDENTIALS_MAX_AGE_MS = 1_000;

export interface KubeCredentials {
  /** The options as of at most `maxAgeMs` ago. Shared between callers: never modify them. */
  options(): Promise<Readonly<https.RequestOptions>>;
}

export function createKubeCredentials(
  kube: KubeConfig,
  {
    clock = systemClock,
    maxAgeMs = CREDENTIALS_MAX_AGE_MS,
  }: { clock?: Clock; maxAgeMs?: number } = {},
): KubeCredentials {
  let cached: { at: number; options: Promise<https.RequestOptions> } | undefined;
  return {
    options() {
      const now = clock.now();
      if (cached === undefined || now - cached.at >= maxAgeMs || now < cached.at) {
        const options: https.RequestOptions = {};
        const applied = kube.applyToHTTPSOptions(options).then(() => options);
        const entry = { at: now, options: applied };
        cached = entry;
        // A failure (an exec plugin that failed, a missing file) is not kept: the next call asks again.
        applied.catch(() => {
          if (cached === entry) cached = undefined;
        });
      }
      return cached.options;
    },
  };
}
