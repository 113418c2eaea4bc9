// The executor's own answer to "may I do what my gates promise": for each gate that is on in its
// own configuration, SelfSubjectAccessReviews on its own identity for what that work needs. The
// collector shows these in the capability catalog; it could not ask them itself (its identity is
// not the executor's). Answers are cached for a minute, so a caller hammering GetCapabilities
// cannot turn the socket into a flood of reviews against the API server.
import { AuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { AccessReview, GateAccess } from '../../proto/index.js';
import { parseResource } from '../../shared/config/resources.js';
import type { Config } from '../../shared/config/schema.js';
import { getErrorMessage } from '../../shared/errors.js';

/** One review to ask: what the work behind a gate needs from the API server. */
export interface AccessNeed {
  readonly group: string;
  readonly resource: string;
  readonly subresource: string;
  readonly verb: string;
  /** "" = cluster-wide. */
  readonly namespace: string;
}

export const GATE_NAMES = ['pod_exec', 'node_shell', 'node_ops', 'mutate'] as const;
export type GateCatalogName = (typeof GATE_NAMES)[number];

/** Reviews per gate at most: mutate rules can name many resources. */
const MAX_REVIEWS_PER_GATE = 32;
const CACHE_MS = 60_000;

/** `resource` is "resource" or "resource/subresource". */
const need = (resource: string, verb: string, namespace = '', group = ''): AccessNeed => {
  const [name = '', subresource = ''] = resource.split('/');
  return { group, resource: name, subresource, verb, namespace };
};

/** Which gates are on, and what each needs, from the executor's own config. */
export function gateNeeds(
  config: Pick<Config, 'exec' | 'mutate'>,
  homeNamespace: string,
): { gate: GateCatalogName; enabled: boolean; needs: AccessNeed[] }[] {
  const shellNamespace = config.exec.node.namespace.trim() || homeNamespace;
  const mutateNeeds: AccessNeed[] = [];
  for (const rule of config.mutate.rules) {
    const namespace = rule.namespace.trim() === '*' ? '' : rule.namespace.trim();
    for (const entry of rule.resources) {
      const ref = parseResource(entry);
      if (ref === undefined) continue;
      for (const verb of rule.verbs) {
        mutateNeeds.push(
          verb === 'scale'
            ? need(`${ref.resource}/scale`, 'patch', namespace, ref.group)
            : need(ref.resource, verb, namespace, ref.group),
        );
      }
    }
  }
  return [
    {
      gate: 'pod_exec',
      enabled: config.exec.pod.enabled,
      needs: [need('pods', 'get'), need('pods/exec', 'create')],
    },
    {
      gate: 'node_shell',
      enabled: config.exec.node.enabled,
      needs: [
        need('pods', 'create', shellNamespace),
        need('pods', 'delete', shellNamespace),
        need('pods/exec', 'create', shellNamespace),
      ],
    },
    {
      gate: 'node_ops',
      enabled: config.mutate.node.enabled,
      needs: [
        need('nodes', 'get'),
        need('nodes', 'patch'),
        need('pods', 'list'),
        need('pods/eviction', 'create'),
      ],
    },
    { gate: 'mutate', enabled: config.mutate.enabled, needs: mutateNeeds },
  ];
}

export interface GateAccessReporter {
  readonly report: () => Promise<GateAccess[]>;
}

/**
 * `kube` is the executor's own identity; undefined when it has none here (outside a Pod with no
 * kubeconfig), and then every review of a gate that is on says why it could not be made.
 */
export function createGateAccessReporter(
  config: Pick<Config, 'exec' | 'mutate'>,
  options: { kube: KubeConfig | undefined; homeNamespace: string; now?: () => number },
): GateAccessReporter {
  const now = options.now ?? Date.now;
  const api = options.kube?.makeApiClient(AuthorizationV1Api);
  let cached: { at: number; answer: Promise<GateAccess[]> } | undefined;

  const review = async (wanted: AccessNeed): Promise<AccessReview> => {
    const base = { ...wanted, allowed: false, reason: '', failed: false };
    if (api === undefined) {
      return { ...base, failed: true, reason: 'the executor has no Kubernetes credentials here' };
    }
    try {
      const answer = await api.createSelfSubjectAccessReview({
        body: {
          spec: {
            resourceAttributes: {
              group: wanted.group,
              resource: wanted.resource,
              verb: wanted.verb,
              ...(wanted.subresource === '' ? {} : { subresource: wanted.subresource }),
              ...(wanted.namespace === '' ? {} : { namespace: wanted.namespace }),
            },
          },
        },
      });
      const status = answer.status;
      return {
        ...base,
        allowed: status?.allowed === true,
        reason: status?.reason ?? status?.evaluationError ?? '',
      };
    } catch (err: unknown) {
      return { ...base, failed: true, reason: getErrorMessage(err).split('\n')[0] ?? '' };
    }
  };

  const compute = async (): Promise<GateAccess[]> =>
    Promise.all(
      gateNeeds(config, options.homeNamespace).map(async ({ gate, enabled, needs }) => ({
        gate,
        enabled,
        reviews: enabled ? await Promise.all(needs.slice(0, MAX_REVIEWS_PER_GATE).map(review)) : [],
      })),
    );

  return {
    report: () => {
      const at = now();
      if (cached === undefined || at - cached.at >= CACHE_MS) {
        cached = { at, answer: compute() };
      }
      return cached.answer;
    },
  };
}
