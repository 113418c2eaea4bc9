// The closed ResourceKind enum of the wire (state.proto) for a group/resource; UNSPECIFIED for
// everything else (CRDs, persistentvolumes, endpoints...), which api_version and resource name.
import { ResourceKind } from '../../../proto/index.js';

const KINDS: ReadonlyMap<string, ResourceKind> = new Map([
  ['/pods', ResourceKind.RESOURCE_KIND_POD],
  ['/services', ResourceKind.RESOURCE_KIND_SERVICE],
  ['/secrets', ResourceKind.RESOURCE_KIND_SECRET],
  ['apps/deployments', ResourceKind.RESOURCE_KIND_DEPLOYMENT],
  ['/nodes', ResourceKind.RESOURCE_KIND_NODE],
  ['/namespaces', ResourceKind.RESOURCE_KIND_NAMESPACE],
  ['/configmaps', ResourceKind.RESOURCE_KIND_CONFIGMAP],
  ['networking.k8s.io/ingresses', ResourceKind.RESOURCE_KIND_INGRESS],
  ['batch/jobs', ResourceKind.RESOURCE_KIND_JOB],
  ['batch/cronjobs', ResourceKind.RESOURCE_KIND_CRONJOB],
  ['apps/statefulsets', ResourceKind.RESOURCE_KIND_STATEFULSET],
  ['apps/daemonsets', ResourceKind.RESOURCE_KIND_DAEMONSET],
  ['apps/replicasets', ResourceKind.RESOURCE_KIND_REPLICASET],
  ['/persistentvolumeclaims', ResourceKind.RESOURCE_KIND_PERSISTENT_VOLUME_CLAIM],
  ['autoscaling/horizontalpodautoscalers', ResourceKind.RESOURCE_KIND_HORIZONTAL_POD_AUTOSCALER],
  ['/serviceaccounts', ResourceKind.RESOURCE_KIND_SERVICE_ACCOUNT],
  ['rbac.authorization.k8s.io/roles', ResourceKind.RESOURCE_KIND_ROLE],
  ['rbac.authorization.k8s.io/rolebindings', ResourceKind.RESOURCE_KIND_ROLE_BINDING],
  ['rbac.authorization.k8s.io/clusterroles', ResourceKind.RESOURCE_KIND_CLUSTER_ROLE],
  [
    'rbac.authorization.k8s.io/clusterrolebindings',
    ResourceKind.RESOURCE_KIND_CLUSTER_ROLE_BINDING,
  ],
  ['networking.k8s.io/networkpolicies', ResourceKind.RESOURCE_KIND_NETWORK_POLICY],
  ['policy/poddisruptionbudgets', ResourceKind.RESOURCE_KIND_POD_DISRUPTION_BUDGET],
  ['storage.k8s.io/storageclasses', ResourceKind.RESOURCE_KIND_STORAGE_CLASS],
  ['discovery.k8s.io/endpointslices', ResourceKind.RESOURCE_KIND_ENDPOINT_SLICE],
]);

export function resourceKind(group: string, resource: string): ResourceKind {
  return KINDS.get(`${group}/${resource}`) ?? ResourceKind.RESOURCE_KIND_UNSPECIFIED;
}
