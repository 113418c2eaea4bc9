// The demo's console target: a small busybox Pod on the local cluster's real node (kwok's nodes
// only simulate pods, so no process runs there and a console on them cannot open). It prints a
// line now and then, so the collector reports it and the Consoles view offers it.
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { clusterVersions } from '../test/cluster/cluster.js';
import { REAL_NODE_LABEL, REAL_NODE_TAINT } from '../test/cluster/node.js';

export const TOOLBOX = { namespace: 'demo-shell', name: 'toolbox', container: 'shell' } as const;

/** Creates the namespace and the Pod; the cluster's removal takes both away. */
export async function startRealNodePod(kc: KubeConfig): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({
    body: { metadata: { name: TOOLBOX.namespace, labels: { 'kubexa.io/demo': 'true' } } },
  });
  await core.createNamespacedPod({
    namespace: TOOLBOX.namespace,
    body: {
      metadata: { name: TOOLBOX.name, labels: { 'kubexa.io/demo': 'true', app: TOOLBOX.name } },
      spec: {
        nodeSelector: { [REAL_NODE_LABEL]: 'true' },
        tolerations: [{ key: REAL_NODE_TAINT, operator: 'Exists', effect: 'NoSchedule' }],
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            name: TOOLBOX.container,
            image: clusterVersions()['BUSYBOX_IMAGE'] ?? '',
            // The image is loaded into the node's runtime by the harness; nothing is pulled.
            imagePullPolicy: 'Never',
            command: [
              'sh',
              '-c',
              'while true; do echo "toolbox on the real node: open a console on me (Consoles view)"; sleep 30; done',
            ],
          },
        ],
      },
    },
  });
}
