{{/*
Where the executor's RBAC applies, derived from the agent's own policy in this chart's values.
The chart always writes the agent's config file from these same values (there is no mounted
config it cannot see), so the RBAC derived here and the policy the executor enforces agree.

A gate whose rules each name one exact namespace gets a Role and a RoleBinding in each of those
namespaces instead of a cluster-wide grant. A pattern ("team-*", "*") or a missing namespace in
any rule keeps the cluster-wide ClusterRole: RBAC cannot express a pattern.
*/}}

{{/* A namespace written exactly (a DNS label), never a pattern. */}}
{{- define "kubexa.isExactNamespace" -}}
{{- if regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" (toString .) -}}
true
{{- end -}}
{{- end -}}

{{/*
kubexa.ruleNamespaces: for a rule list, JSON {"scoped": bool, "namespaces": [...]}. scoped is
true when every rule names one exact namespace; namespaces are then those names, sorted and
unique (an empty list when there is no rule: the policy allows nothing, so nothing is granted).
*/}}
{{- define "kubexa.ruleNamespaces" -}}
{{- $scoped := true -}}
{{- $namespaces := list -}}
{{- range $rule := . -}}
{{- $namespace := "" -}}
{{- if kindIs "map" $rule -}}
{{- $namespace = toString (index $rule "namespace" | default "") -}}
{{- end -}}
{{- if include "kubexa.isExactNamespace" $namespace -}}
{{- $namespaces = append $namespaces $namespace -}}
{{- else -}}
{{- $scoped = false -}}
{{- end -}}
{{- end -}}
{{- dict "scoped" $scoped "namespaces" ($namespaces | uniq | sortAlpha) | toJson -}}
{{- end -}}

{{/*
kubexa.executorScope: JSON of where each executor gate's RBAC applies.
  exec:  {"scoped", "namespaces"} from exec.pod.rules
  write: {"scoped", "namespaces"} from mutate.rules
  nodeShellNamespace: exec.node.namespace, else the release namespace (the helper Pods' home)
*/}}
{{- define "kubexa.executorScope" -}}
{{- $exec := (.Values.exec | default dict) -}}
{{- $execPod := $exec.pod | default dict -}}
{{- $execNode := $exec.node | default dict -}}
{{- $mutate := .Values.mutate | default dict -}}
{{- $nodeShellNamespace := toString ($execNode.namespace | default "") | trim | default .Release.Namespace -}}
{{- dict
  "exec" (include "kubexa.ruleNamespaces" ($execPod.rules | default list) | fromJson)
  "write" (include "kubexa.ruleNamespaces" ($mutate.rules | default list) | fromJson)
  "nodeShellNamespace" $nodeShellNamespace
  | toJson -}}
{{- end -}}

{{/* rbac.exec: pod consoles (resolve the default container, open the exec stream). Namespaced. */}}
{{- define "kubexa.rules.exec" -}}
- apiGroups: [""]
  resources: [pods]
  verbs: [get]
- apiGroups: [""]
  resources: [pods/exec]
  verbs: [get, create]
{{- end -}}

{{/*
rbac.nodeOps: cordon/uncordon (nodes patch) and drain (list the node's pods, evict them,
recognise DaemonSet pods). Nodes are cluster-scoped and a drain crosses namespaces: always a
ClusterRole.
*/}}
{{- define "kubexa.rules.nodeOps" -}}
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, patch]
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
- apiGroups: [apps]
  resources: [daemonsets]
  verbs: [get]
{{- end -}}

{{/*
rbac.write: generic mutations over the enumerated resource lists, never a wildcard. With
(dict "namespaced" true) only the namespaced resources: the form a Role in one namespace holds
(nodes, persistentvolumes, clusterroles, clusterrolebindings and storageclasses are
cluster-scoped, and a rule naming one namespace never reaches them).
*/}}
{{- define "kubexa.rules.write" -}}
{{- $namespaced := .namespaced -}}
- apiGroups: [""]
  resources: [pods, services, secrets, configmaps, endpoints, persistentvolumeclaims, {{ if not $namespaced }}persistentvolumes, {{ end }}serviceaccounts, {{ if not $namespaced }}nodes, {{ end }}resourcequotas, limitranges, replicationcontrollers]
  verbs: [create, update, patch, delete]
- apiGroups: [apps]
  resources: [deployments, daemonsets, replicasets, statefulsets]
  verbs: [create, update, patch, delete]
- apiGroups: [batch]
  resources: [jobs, cronjobs]
  verbs: [create, update, patch, delete]
- apiGroups: [networking.k8s.io]
  resources: [ingresses, networkpolicies]
  verbs: [create, update, patch, delete]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings{{ if not $namespaced }}, clusterroles, clusterrolebindings{{ end }}]
  verbs: [create, update, patch, delete]
- apiGroups: [autoscaling]
  resources: [horizontalpodautoscalers]
  verbs: [create, update, patch, delete]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [create, update, patch, delete]
{{- if not $namespaced }}
- apiGroups: [storage.k8s.io]
  resources: [storageclasses]
  verbs: [create, update, patch, delete]
{{- end }}
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [create, update, patch, delete]
# The scale subresource of each scalable enumerated resource.
- apiGroups: [""]
  resources: [replicationcontrollers/scale]
  verbs: [get, update, patch]
- apiGroups: [apps]
  resources: [deployments/scale, replicasets/scale, statefulsets/scale]
  verbs: [get, update, patch]
{{- end -}}

{{/* rbac.nodeShell: the privileged helper Pods in their namespace, and a shell in them. */}}
{{- define "kubexa.rules.nodeShell" -}}
- apiGroups: [""]
  resources: [pods]
  verbs: [create, get, list, watch, delete]
- apiGroups: [""]
  resources: [pods/exec]
  verbs: [get, create]
# A helper that does not start is explained from its events (an image pull that fails).
- apiGroups: [""]
  resources: [events]
  verbs: [list]
{{- end -}}

{{/*
rbac.nodeShell with exec.node.namespace elsewhere: the boot sweep also removes orphan helpers
left in the release namespace by an earlier configuration. It lists and deletes; it never
creates a Pod or opens a shell there, so the release namespace needs no privileged Pod Security
level.
*/}}
{{- define "kubexa.rules.nodeShellSweep" -}}
- apiGroups: [""]
  resources: [pods]
  verbs: [list, delete]
{{- end -}}

{{/*
kubexa.namespacedGrant: a Role with .rules and its RoleBinding to the executor, in .namespace.
Arguments: dict "root" $ "name" <suffix> "namespace" <ns> "rules" <rules YAML> "why" <comment>.
*/}}
{{- define "kubexa.namespacedGrant" -}}
{{- $root := .root -}}
{{- $name := printf "%s-%s" (include "kubexa.executorName" $root) .name -}}
---
# {{ .why }}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "kubexa.labels" $root | nindent 4 }}
    app.kubernetes.io/component: executor
rules:
  {{- .rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "kubexa.labels" $root | nindent 4 }}
    app.kubernetes.io/component: executor
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ include "kubexa.executorName" $root }}
    namespace: {{ $root.Release.Namespace }}
{{- end -}}
