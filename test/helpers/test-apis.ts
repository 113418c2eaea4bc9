// API definitions the discovery tests install on the shared test cluster: a CRD with one served
// version, and an APIService whose Service does not exist (the aggregator marks it unavailable and
// discovery lists its group version as Stale).
import {
  ApiregistrationV1Api,
  type KubeConfig,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';

export interface CrdShape {
  readonly group: string;
  readonly plural: string;
  readonly kind: string;
  readonly scope: 'Namespaced' | 'Cluster';
}

/** A CRD serving `v1` of its group, any fields kept. */
export function crdManifest(shape: CrdShape): V1CustomResourceDefinition {
  return {
    metadata: { name: `${shape.plural}.${shape.group}` },
    spec: {
      group: shape.group,
      scope: shape.scope,
      names: {
        plural: shape.plural,
        singular: shape.kind.toLowerCase(),
        kind: shape.kind,
      },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true },
          },
        },
      ],
    },
  };
}

/**
 * Registers `v1.<group>` behind a Service that does not exist in `namespace`; resolves with the
 * function that removes it.
 */
export async function registerDeadApiService(
  kc: KubeConfig,
  namespace: string,
  group: string,
): Promise<() => Promise<unknown>> {
  const registration = kc.makeApiClient(ApiregistrationV1Api);
  await registration.createAPIService({
    body: {
      metadata: { name: `v1.${group}` },
      spec: {
        group,
        version: 'v1',
        service: { namespace, name: 'nothing-here', port: 443 },
        insecureSkipTLSVerify: true,
        groupPriorityMinimum: 1000,
        versionPriority: 15,
      },
    },
  });
  return () => registration.deleteAPIService({ name: `v1.${group}` });
}
