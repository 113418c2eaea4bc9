// The live query as the collector wires it: policy compiled once from query.*, one kept-alive
// HTTPS client on the collector's identity, the self-metrics, and the handler the gateway
// session calls for each ResourceQuery.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Config } from '../../shared/config/schema.js';
import type { Service } from '../../shared/lifecycle/service.js';
import type { QueryHandler } from '../gateway/types.js';
import { createKubeRest, type KubeRest } from './kube-rest.js';
import { compileQueryPolicy, type QueryPolicy } from './policy.js';
import { registerQueryMetrics } from './query-metrics.js';
import { createQueryRunner } from './run-query.js';

export interface LiveQuery {
  readonly policy: QueryPolicy;
  readonly rest: KubeRest;
  readonly handler: QueryHandler;
  /** Closes the kept-alive connections at shutdown. */
  readonly service: Service;
}

export function createLiveQuery(
  query: Config['query'],
  deps: {
    readonly kube: KubeConfig;
    readonly logger: Logger;
    readonly registry: Registry;
    /** security.profile strict: Secrets are read as metadata only (run-query.ts). */
    readonly secretsMetadataOnly?: boolean;
  },
): LiveQuery {
  const policy = compileQueryPolicy(query);
  const rest = createKubeRest(deps.kube);
  if (!policy.enabled) {
    deps.logger.info('query.enabled is false: every live query is refused with POLICY_DENIED');
  }
  const handler = createQueryRunner({
    rest,
    policy,
    logger: deps.logger,
    metrics: registerQueryMetrics(deps.registry),
    secretsMetadataOnly: deps.secretsMetadataOnly === true,
  });
  return {
    policy,
    rest,
    handler,
    service: {
      name: 'live-query',
      start: () => Promise.resolve(),
      close: () => {
        rest.close();
        return Promise.resolve();
      },
    },
  };
}
