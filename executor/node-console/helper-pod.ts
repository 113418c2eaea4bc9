// The node console's helper Pod (anchors C.4): pinned to the node by spec.nodeName (the scheduler,
// cordons and NoSchedule taints do not apply), privileged with the host's PID, network and IPC
// namespaces so that nsenter reaches the host, tolerating every taint, with no ServiceAccount
// token, `sleep` as PID 1 so the console is an exec (re-entry works, the exit status arrives on
// the status channel), and activeDeadlineSeconds as the backstop when every cleanup path fails.
// Its labels name the session and the agent's release, so the boot sweep can find orphans.
import type { V1Pod } from '@kubernetes/client-node';

export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'kubexa-agent';
export const SESSION_LABEL = 'kubexa.io/node-console-session';
export const RELEASE_LABEL = 'app.kubernetes.io/instance';
export const NODE_LABEL = 'kubexa.io/node';
/** The standard target: the host's init. Tests on VMs whose PID 1 cannot be entered pick another. */
export const DEFAULT_NSENTER_TARGET_PID = 1;

export interface HelperPodOptions {
  readonly node: string;
  readonly namespace: string;
  readonly image: string;
  readonly sessionId: string;
  readonly release: string;
  /** The session's whole lifetime; the Pod ends on its own shortly after. */
  readonly maxSessionSec: number;
}

/** Grace after the session's end before the kubelet kills the helper itself. */
const DEADLINE_GRACE_SEC = 30;
const LABEL_VALUE_MAX = 63;

/** A label value from any text: the allowed characters, at most 63, ends alphanumeric. */
export function labelValue(text: string): string {
  const trim = (value: string) => value.replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
  return trim(trim(text.replace(/[^A-Za-z0-9._-]/g, '-')).slice(0, LABEL_VALUE_MAX));
}

export function helperPod(options: HelperPodOptions): V1Pod {
  const lifetime = options.maxSessionSec + DEADLINE_GRACE_SEC;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: `node-shell-${options.node.slice(0, 40)}-`,
      namespace: options.namespace,
      labels: {
        [MANAGED_BY_LABEL]: MANAGED_BY,
        [SESSION_LABEL]: labelValue(options.sessionId),
        [RELEASE_LABEL]: labelValue(options.release),
        [NODE_LABEL]: labelValue(options.node),
      },
    },
    spec: {
      nodeName: options.node,
      hostPID: true,
      hostNetwork: true,
      hostIPC: true,
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 0,
      activeDeadlineSeconds: lifetime,
      tolerations: [{ operator: 'Exists' }],
      containers: [
        {
          name: 'shell',
          image: options.image,
          command: ['sleep', String(lifetime)],
          securityContext: { privileged: true },
          stdin: true,
          tty: true,
          resources: {
            requests: { cpu: '100m', memory: '64Mi' },
            limits: { cpu: '100m', memory: '256Mi' },
          },
        },
      ],
    },
  };
}

/** What the console execs in the helper: nsenter into every namespace of the target process. */
export function nsenterCommand(shell: string, targetPid = DEFAULT_NSENTER_TARGET_PID): string[] {
  if (!Number.isInteger(targetPid) || targetPid < 1) {
    throw new Error(
      `the nsenter target must be a process id (1 or more), not ${String(targetPid)}`,
    );
  }
  return ['nsenter', '-t', String(targetPid), '-m', '-u', '-i', '-n', '-p', '--', shell];
}
