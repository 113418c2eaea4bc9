// The demo's pods on the local cluster's real node (kwok's nodes only simulate pods, so no
// process runs there): a small busybox console target, and a container that crashes for real.
// - toolbox prints a line now and then, so the collector reports it and the Consoles view
//   offers it;
// - crashloop prints a few lines and exits 3; with restartPolicy Always the kubelet restarts it
//   with a growing back-off, so the Events view shows a real CrashLoopBackOff (restart count,
//   exit code) and the Logs view each run's lines.
import { CoreV1Api, type KubeConfig, type V1Container } from '@kubernetes/client-node';
import { clusterVersions } from '../test/cluster/cluster.js';
import { REAL_NODE_LABEL, REAL_NODE_TAINT } from '../test/cluster/node.js';

export const TOOLBOX = { namespace: 'demo-shell', name: 'toolbox', container: 'shell' } as const;
export const CRASHLOOP = {
  namespace: 'demo-shell',
  name: 'crashloop',
  container: 'migrate',
} as const;
/** What the crashing container exits with (the Events view shows it). */
export const CRASHLOOP_EXIT_CODE = 3;

const CRASHLOOP_SCRIPT = [
  'echo "migrate: connecting to postgres://orders-db:5432/orders"',
  'echo "migrate: schema at 0041, applying 0042_add_refund_index.sql"',
  'sleep 1',
  'echo "ERROR migrate: relation \\"refunds\\" does not exist (SQLSTATE 42P01)" >&2',
  `echo "migrate: giving up, exit ${String(CRASHLOOP_EXIT_CODE)}" >&2`,
  `exit ${String(CRASHLOOP_EXIT_CODE)}`,
].join('; ');

const LABELS = { 'kubexa.io/demo': 'true' };

function busybox(name: string, script: string): V1Container {
  return {
    name,
    image: clusterVersions()['BUSYBOX_IMAGE'] ?? '',
    // The image is loaded into the node's runtime by the harness; nothing is pulled.
    imagePullPolicy: 'Never',
    command: ['sh', '-c', script],
  };
}

/** Creates the namespace and both Pods; the cluster's removal takes them away. */
export async function startRealNodePods(kc: KubeConfig): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({
    body: { metadata: { name: TOOLBOX.namespace, labels: LABELS } },
  });
  const onRealNode = {
    nodeSelector: { [REAL_NODE_LABEL]: 'true' },
    tolerations: [{ key: REAL_NODE_TAINT, operator: 'Exists', effect: 'NoSchedule' }],
    terminationGracePeriodSeconds: 1,
  };
  await Promise.all([
    core.createNamespacedPod({
      namespace: TOOLBOX.namespace,
      body: {
        metadata: { name: TOOLBOX.name, labels: { ...LABELS, app: TOOLBOX.name } },
        spec: {
          ...onRealNode,
          containers: [
            busybox(
              TOOLBOX.container,
              'while true; do echo "toolbox on the real node: open a console on me (Consoles view)"; sleep 30; done',
            ),
          ],
        },
      },
    }),
    core.createNamespacedPod({
      namespace: CRASHLOOP.namespace,
      body: {
        metadata: { name: CRASHLOOP.name, labels: { ...LABELS, app: CRASHLOOP.name } },
        spec: {
          ...onRealNode,
          restartPolicy: 'Always',
          containers: [busybox(CRASHLOOP.container, CRASHLOOP_SCRIPT)],
        },
      },
    }),
  ]);
}
