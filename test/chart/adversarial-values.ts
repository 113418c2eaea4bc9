// Values a careless or hostile operator might set to merge the two identities, widen the
// collector's RBAC or weaken the gateway transport. Each must be refused at render time with a
// message that names the key. Shared by the chart refusal tests and `npm run test:security`.
import { deepMerge, type Values } from './helm.js';
import { RENDER_UNIMPLEMENTED } from './rbac-expectations.js';

export interface AdversarialCase {
  readonly name: string;
  readonly values: Values;
  /** Text the refusal must contain (the key, and where it helps, the offending value). */
  readonly message: string;
}

const gated = (values: Values): Values =>
  deepMerge(deepMerge({ rbac: { exec: true } }, RENDER_UNIMPLEMENTED), values);

const extraRule = (resource: string, extra: Values = {}): Values => ({
  rbac: { extraRules: [{ apiGroups: [''], resources: [resource], verbs: ['get'] }], ...extra },
});

export const ADVERSARIAL_CASES: readonly AdversarialCase[] = [
  // rbac.extraRules, matched as RBAC matches (exact, "*", "*/sub"), not by string equality.
  ...['*', '*/proxy', '*/exec', '*/attach', '*/token', '*/portforward'].map((resource) => ({
    name: `extraRules resource ${resource}`,
    values: extraRule(resource),
    message: `rbac.extraRules[0].resources has "${resource}"`,
  })),
  ...[
    'pods/exec',
    'nodes/proxy',
    'services/proxy',
    'pods/portforward',
    'pods/attach',
    'pods/*',
    'serviceaccounts/token',
    'pods/ephemeralcontainers',
    'pods/eviction',
    'deployments/scale',
  ].map((resource) => ({
    name: `extraRules subresource ${resource}`,
    values: extraRule(resource),
    message: `rbac.extraRules[0].resources has "${resource}"`,
  })),
  {
    name: 'extraRules secrets while the executor exists',
    values: gated(extraRule('secrets')),
    message: 'rbac.extraRules[0].resources has "secrets", which covers secrets',
  },
  {
    name: 'extraRules wildcard nonResourceURL',
    values: { rbac: { extraRules: [{ nonResourceURLs: ['/logs/*'], verbs: ['get'] }] } },
    message: 'rbac.extraRules[0].nonResourceURLs has "/logs/*"',
  },
  // One identity per container.
  {
    name: 'serviceAccount.name default',
    values: { serviceAccount: { name: 'default' } },
    message: 'serviceAccount.name=default is refused',
  },
  {
    name: 'serviceAccount.name default without create',
    values: { serviceAccount: { create: false, name: 'default' } },
    message: 'serviceAccount.name=default is refused',
  },
  {
    name: "serviceAccount.name the executor's",
    values: gated({ serviceAccount: { name: 'kubexa-agent-executor' } }),
    message: "serviceAccount.name=kubexa-agent-executor is the executor's ServiceAccount",
  },
  {
    name: "serviceAccount.name the executor's with every gate off",
    values: { serviceAccount: { name: 'kubexa-agent-executor' } },
    message: "serviceAccount.name=kubexa-agent-executor is the executor's ServiceAccount",
  },
  {
    name: 'the same UID for both containers',
    values: gated({ executor: { runAsUser: 65532 } }),
    message: 'executor.runAsUser=65532 equals podSecurityContext.runAsUser',
  },
  // Reserved volumes and paths.
  ...['executor-token', 'collector-token', 'executor-socket', 'config', 'data'].map((name) => ({
    name: `extraVolumeMounts of reserved volume ${name}`,
    values: gated({ extraVolumeMounts: [{ name, mountPath: '/extra' }] }),
    message: `extraVolumeMounts[0].name=${name} is a volume reserved by the chart`,
  })),
  ...['executor-token', 'executor-socket', 'tmp'].map((name) => ({
    name: `extraVolumes named ${name}`,
    values: { extraVolumes: [{ name, emptyDir: {} }] },
    message: `extraVolumes[0].name=${name} is reserved by the chart`,
  })),
  {
    name: 'extraVolumeMounts over the token path',
    values: {
      extraVolumes: [{ name: 'mine', emptyDir: {} }],
      extraVolumeMounts: [{ name: 'mine', mountPath: '/var/run/secrets/kubernetes.io' }],
    },
    message: 'extraVolumeMounts[0].mountPath=/var/run/secrets/kubernetes.io overlaps',
  },
  {
    name: 'extraVolumeMounts under the socket directory',
    values: gated({
      extraVolumes: [{ name: 'mine', emptyDir: {} }],
      extraVolumeMounts: [{ name: 'mine', mountPath: '/run/kubexa/executor' }],
    }),
    message: 'extraVolumeMounts[0].mountPath=/run/kubexa/executor overlaps /run/kubexa',
  },
  // The executor's credentials never reach the collector.
  {
    name: "extraVolumes with the executor's Secret",
    values: gated({
      extraVolumes: [{ name: 'stolen', secret: { secretName: 'kubexa-agent-executor-token' } }],
    }),
    message: "extraVolumes[0] refers to kubexa-agent-executor, the executor's identity",
  },
  {
    name: 'extraVolumes with a projected ServiceAccount token',
    values: gated({
      extraVolumes: [
        { name: 'stolen', projected: { sources: [{ serviceAccountToken: { path: 'token' } }] } },
      ],
    }),
    message: 'extraVolumes[0] projects a serviceAccountToken',
  },
  {
    name: "extraEnv from the executor's Secret",
    values: gated({
      extraEnv: [
        {
          name: 'T',
          valueFrom: { secretKeyRef: { name: 'kubexa-agent-executor-token', key: 'token' } },
        },
      ],
    }),
    message: "extraEnv[0] refers to kubexa-agent-executor, the executor's identity",
  },
  {
    name: 'extraEnv pointing at a ServiceAccount token file',
    values: {
      extraEnv: [{ name: 'T', value: '/var/run/secrets/kubernetes.io/serviceaccount/token' }],
    },
    message: 'extraEnv[0] refers to a ServiceAccount token',
  },
  {
    name: "secret.existingSecret the executor's",
    values: gated({ secret: { existingSecret: 'kubexa-agent-executor-token' } }),
    message: "secret.existingSecret=kubexa-agent-executor-token belongs to the executor's identity",
  },
  // Transport.
  {
    name: 'gateway.tls=false without allowInsecure',
    values: { gateway: { tls: false } },
    message: 'gateway.tls=false sends the tenant token',
  },
  {
    name: 'gateway.insecureSkipVerify=true without allowInsecure',
    values: { gateway: { insecureSkipVerify: true } },
    message: 'gateway.insecureSkipVerify=true sends the tenant token',
  },
  ...[
    { insecureSkipVerify: true, allowInsecure: true },
    { allowInsecure: true },
    { tls: false },
  ].map((gateway) => ({
    name: `security.profile=strict with ${JSON.stringify(gateway)}`,
    values: { security: { profile: 'strict' }, gateway },
    message: 'security.profile=strict refuses gateway.tls=false',
  })),
  {
    name: 'security.profile=strict with allowInsecure',
    values: { security: { profile: 'strict' }, gateway: { tls: false, allowInsecure: true } },
    message: 'security.profile=strict refuses gateway.tls=false',
  },
  // The node-console helper runs as root on the node: its image is pinned by digest.
  ...[
    'busybox',
    'busybox:1.36',
    'busybox@sha256:abc',
    `busybox:latest@sha512:${'a'.repeat(64)}`,
  ].map((image) => ({
    name: `exec.node.image ${image} (not pinned by digest)`,
    values: { exec: { node: { enabled: true, image } } },
    message: `exec.node.image "${image}" must be pinned by digest`,
  })),
  // Every privileged gate's feature exists now (exec, nodeShell, nodeOps, write); the refusal
  // of a gate before its feature is proven on a chart copy in refusals.test.ts.
];
