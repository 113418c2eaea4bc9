// Builds the node-job and mutation services from the executor's own config, when either gate is
// on. The API server is reached with the executor's own identity: in the Pod, its projected
// ServiceAccount token; elsewhere (the demo, tests) KUBECONFIG.
import { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { systemClock } from '../../shared/clock.js';
import type { Config } from '../../shared/config/schema.js';
import type { Service } from '../../shared/lifecycle/service.js';
import type { CommandGuard } from '../guard/authorize-command.js';
import { createKubeHttp } from '../kube/kube-http.js';
import { createMutationService, type MutationService } from '../mutations/mutation-service.js';
import { createNodeApi } from './node-api.js';
import { createNodeJobService, type NodeJobService } from './node-job-service.js';

export interface NodeJobServices {
  readonly serverOptions: { nodeJobs?: NodeJobService; mutations?: MutationService };
  /** Cancels a running job on stop. */
  readonly service: Service;
}

/** The executor's own identity: KUBECONFIG when set (tests, local runs), else in-cluster. */
function executorKubeConfig(env: NodeJS.ProcessEnv): KubeConfig | undefined {
  const kc = new KubeConfig();
  const file = env['KUBECONFIG'] ?? '';
  if (file !== '') kc.loadFromFile(file);
  else if ((env['KUBERNETES_SERVICE_HOST'] ?? '') !== '') kc.loadFromCluster();
  else return undefined;
  return kc;
}

export function createNodeJobServices(
  config: Pick<Config, 'mutate'>,
  guard: CommandGuard,
  env: NodeJS.ProcessEnv,
  logger: Logger,
): NodeJobServices {
  const idle: Service = {
    name: 'node-jobs',
    start: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
  if (!config.mutate.enabled && !config.mutate.node.enabled)
    return { serverOptions: {}, service: idle };
  const kc = executorKubeConfig(env);
  if (kc === undefined) {
    // Neither in a Pod nor given a kubeconfig (a local run): start, and refuse these requests.
    logger.warn('no Kubernetes cluster configured: node jobs and mutations are refused');
    return { serverOptions: {}, service: idle };
  }
  const kube = createKubeHttp(kc);
  const podName = env['KUBEXA_POD_NAME'];
  const podNamespace = env['KUBEXA_POD_NAMESPACE'];
  const self =
    podName !== undefined && podName !== '' && podNamespace !== undefined && podNamespace !== ''
      ? { namespace: podNamespace, name: podName }
      : undefined;
  if (self === undefined && config.mutate.node.enabled) {
    logger.warn(
      "KUBEXA_POD_NAME/KUBEXA_POD_NAMESPACE are unset: a drain cannot recognise the agent's own Pod",
    );
  }
  const nodeJobs = createNodeJobService({
    config: config.mutate.node,
    guard,
    api: createNodeApi(kube),
    self,
    clock: systemClock,
    logger,
  });
  const mutations = createMutationService({
    config: config.mutate,
    guard,
    kube,
    clock: systemClock,
    logger,
  });
  return {
    serverOptions: { nodeJobs, mutations },
    service: {
      name: 'node-jobs',
      start: () => Promise.resolve(),
      async close() {
        await nodeJobs.close();
        kube.close();
      },
    },
  };
}
