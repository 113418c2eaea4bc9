{{/* Chart name, 63 characters at most. */}}
{{- define "kubexa.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: fullnameOverride, else the release name if it contains the chart name, else
"<release>-<chart>". Leaves room for the "-executor" suffix. */}}
{{- define "kubexa.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Cluster-scoped objects carry the namespace, so equal release names in two namespaces never
collide: "<namespace>:<fullname>". */}}
{{- define "kubexa.clusterName" -}}
{{- printf "%s:%s" .Release.Namespace (include "kubexa.fullname" .) -}}
{{- end -}}

{{- define "kubexa.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kubexa.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "kubexa.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubexa.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The collector's ServiceAccount (the Pod's serviceAccountName). */}}
{{- define "kubexa.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kubexa.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- /* Never fall back to "default": the collector's ClusterRole would then reach every Pod that uses it. */ -}}
{{- required "kubexa-agent: serviceAccount.name is required when serviceAccount.create=false (never the namespace's default ServiceAccount, which other Pods share)" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* "true" when a privileged gate is on: only then does any executor object exist. */}}
{{- define "kubexa.executorEnabled" -}}
{{- if or .Values.rbac.exec .Values.rbac.nodeShell .Values.rbac.nodeOps .Values.rbac.write -}}
true
{{- end -}}
{{- end -}}

{{/*
"true" when the collector's ClusterRole includes Secrets. Never together with the executor: the
collector must not read credentials in the release namespace the executor works from (a
ServiceAccount token Secret someone created there, a helper's credentials), and RBAC cannot
exclude one Secret. The chart itself renders no token Secret.
*/}}
{{- define "kubexa.collectorReadsSecrets" -}}
{{- $executor := include "kubexa.executorEnabled" . -}}
{{- $asked := .Values.rbac.collectorReadsSecrets -}}
{{- if and $executor (eq (toString $asked) "true") -}}
{{- fail "kubexa-agent: rbac.collectorReadsSecrets=true cannot be combined with an executor gate (rbac.exec, rbac.nodeShell, rbac.nodeOps, rbac.write): anyone who may create Secrets in the release namespace can have the API server fill a token Secret for the executor's ServiceAccount, and a collector that reads Secrets could then act as the executor. Leave rbac.collectorReadsSecrets unset (or false) to enable the executor." -}}
{{- end -}}
{{- if and $executor .Values.rbac.readAll -}}
{{- fail "kubexa-agent: rbac.readAll cannot be combined with an executor gate (rbac.exec, rbac.nodeShell, rbac.nodeOps, rbac.write): readAll includes Secrets (a token Secret for the executor's ServiceAccount among them, if anyone creates one). Turn rbac.readAll off, or list the resources the collector needs in rbac.extraRules." -}}
{{- end -}}
{{- if and (not $executor) (ne (toString $asked) "false") -}}
true
{{- end -}}
{{- end -}}

{{- define "kubexa.executorName" -}}
{{- printf "%s-executor" (include "kubexa.fullname" .) -}}
{{- end -}}

{{- define "kubexa.executorTokenSecretName" -}}
{{- printf "%s-executor-token" (include "kubexa.fullname" .) -}}
{{- end -}}

{{- define "kubexa.tokenSecretName" -}}
{{- if .Values.secret.existingSecret -}}
{{- .Values.secret.existingSecret -}}
{{- else -}}
{{- printf "%s-token" (include "kubexa.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "kubexa.configMapName" -}}
{{- printf "%s-config" (include "kubexa.fullname" .) -}}
{{- end -}}

{{- define "kubexa.pvcName" -}}
{{- default (printf "%s-data" (include "kubexa.fullname" .)) .Values.persistence.existingClaim -}}
{{- end -}}

{{- define "kubexa.image" -}}
{{- printf "%s:%s" .image.repository (default .appVersion .image.tag) -}}
{{- end -}}

{{/* gateway.address, else host:port. */}}
{{- define "kubexa.gatewayAddress" -}}
{{- $gw := .Values.gateway | default dict -}}
{{- if $gw.address -}}
{{- $gw.address -}}
{{- else if $gw.host -}}
{{- printf "%s:%v" $gw.host ($gw.port | default 443 | int) -}}
{{- else -}}
{{- fail "kubexa-agent: gateway.address or gateway.host must be set" -}}
{{- end -}}
{{- end -}}

{{/* The port number of a listen address such as ":8080" or "0.0.0.0:9090". */}}
{{- define "kubexa.addrPort" -}}
{{- $port := regexFind "[0-9]+$" (toString .addr) -}}
{{- if not $port -}}
{{- fail (printf "kubexa-agent: %s must end in a port number (got %q)" .key (toString .addr)) -}}
{{- end -}}
{{- $port -}}
{{- end -}}

{{- define "kubexa.healthPort" -}}
{{- $obs := .Values.observability | default dict -}}
{{- include "kubexa.addrPort" (dict "addr" ($obs.healthAddr | default ":8080") "key" "observability.healthAddr") -}}
{{- end -}}

{{- define "kubexa.metricsPort" -}}
{{- $obs := .Values.observability | default dict -}}
{{- include "kubexa.addrPort" (dict "addr" ($obs.metricsAddr | default ":9090") "key" "observability.metricsAddr") -}}
{{- end -}}

{{/*
Config conversion. Values paths (camelCase, dotted) whose value is a duration outside a list: the
schema lets only the number 0 through there, and the agent wants a string, so these are written
as quoted strings ("0"). Keep in sync with the config schema's block-level durations.
*/}}
{{- define "kubexa.durationPaths" -}}
gateway.reconnectInitialDelay
gateway.reconnectMaxDelay
gateway.dialTimeout
gateway.handshakeTimeout
collect.state.resyncPeriod
collect.metrics.podInterval
collect.metrics.nodeInterval
buffer.flushInterval
{{- end -}}

{{/*
kubexa.snakeInto: copies map .src into map .dst with every map key in snake_case, recursively.
Lists (rule lists and every other list) are copied verbatim: their keys are already the agent's
own snake_case keys. Nulls are dropped (unset = the agent's default). .path is the camelCase
path of .src; .durations the list of duration paths.
*/}}
{{- define "kubexa.snakeInto" -}}
{{- $ctx := . -}}
{{- range $key, $value := $ctx.src -}}
{{- $path := ternary $key (printf "%s.%s" $ctx.path $key) (eq $ctx.path "") -}}
{{- if kindIs "invalid" $value -}}
{{- else if kindIs "map" $value -}}
{{- $child := dict -}}
{{- $_ := include "kubexa.snakeInto" (dict "src" $value "dst" $child "path" $path "durations" $ctx.durations) -}}
{{- $_ := set $ctx.dst (snakecase $key) $child -}}
{{- else if and (has $path $ctx.durations) (not (kindIs "slice" $value)) -}}
{{- $_ := set $ctx.dst (snakecase $key) (toString $value) -}}
{{- else -}}
{{- $_ := set $ctx.dst (snakecase $key) $value -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The agent's config file (YAML), from the config sections of the values. */}}
{{- define "kubexa.configFile" -}}
{{- $agent := deepCopy (.Values.agent | default dict) -}}
{{- if $agent.tenantToken -}}
{{- fail "kubexa-agent: agent.tenantToken would put the token in a ConfigMap; set secret.tenantToken or secret.existingSecret instead" -}}
{{- end -}}
{{- $_ := unset $agent "tenantToken" -}}
{{- $gateway := omit (.Values.gateway | default dict) "host" "port" -}}
{{- $_ := set $gateway "address" (include "kubexa.gatewayAddress" .) -}}
{{- $src := dict "agent" $agent "gateway" $gateway -}}
{{- range $section := list "collect" "query" "mutate" "exec" "buffer" "observability" "log" "security" -}}
{{- if hasKey $.Values $section -}}
{{- $_ := set $src $section (index $.Values $section) -}}
{{- end -}}
{{- end -}}
{{- $out := dict -}}
{{- $durations := include "kubexa.durationPaths" . | splitList "\n" -}}
{{- $_ := include "kubexa.snakeInto" (dict "src" $src "dst" $out "path" "" "durations" $durations) -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The securityContext every container gets; deliberately not configurable. */}}
{{- define "kubexa.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Where a container finds its ServiceAccount credentials (the in-cluster default path). */}}
{{- define "kubexa.tokenMountPath" -}}
/var/run/secrets/kubernetes.io/serviceaccount
{{- end -}}

{{/* The Pod-local Unix socket directory the collector and the executor share. */}}
{{- define "kubexa.socketDir" -}}
/run/kubexa
{{- end -}}

{{/* The socket itself, in a directory the executor creates and owns (0750) inside socketDir. */}}
{{- define "kubexa.socketPath" -}}
{{- printf "%s/executor/executor.sock" (include "kubexa.socketDir" .) -}}
{{- end -}}

{{/* Where the executor writes the collector's minted token (the executor container's view). */}}
{{- define "kubexa.mintedTokenDir" -}}
/run/kubexa-collector-token
{{- end -}}
