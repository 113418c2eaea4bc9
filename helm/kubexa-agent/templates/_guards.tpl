{{/*
Refusals the values schema cannot express. Every one names its key and the fix. The Deployment
template includes "kubexa.guards" first, so a refused combination renders nothing at all.
*/}}

{{/*
Features the executor really implements. A gate whose feature is not listed here is refused
unless executor.renderUnimplemented=true, and its RBAC is never rendered: the chart does not
grant a permission that no code uses. Add a feature here in the change that implements it.
*/}}
{{- define "kubexa.implementedFeatures" -}}
{{- list "exec" "nodeShell" "nodeOps" "write" | toJson -}}
{{- end -}}

{{- define "kubexa.featureImplemented" -}}
{{- if has . (include "kubexa.implementedFeatures" "" | fromJsonArray) -}}
true
{{- end -}}
{{- end -}}

{{/*
kubexa.rbacMatches: "true" when an RBAC rule resource (.rule) covers the resource (.target),
both written "resource" or "resource/subresource", as the API server's authorizer matches them:
a lone star covers everything, star-slash-sub covers that subresource of every resource,
res-slash-star every subresource of res, otherwise the strings must be equal.
*/}}
{{- define "kubexa.rbacMatches" -}}
{{- $rule := toString .rule -}}
{{- $target := toString .target -}}
{{- $targetParts := splitList "/" $target -}}
{{- $targetSub := "" -}}
{{- if gt (len $targetParts) 1 -}}{{- $targetSub = index $targetParts 1 -}}{{- end -}}
{{- if or (eq $rule "*") (eq $rule $target) -}}
true
{{- else if and (hasPrefix "*/" $rule) (ne $targetSub "") (eq (trimPrefix "*/" $rule) $targetSub) -}}
true
{{- else if and (hasSuffix "/*" $rule) (ne $targetSub "") (eq (trimSuffix "/*" $rule) (index $targetParts 0)) -}}
true
{{- end -}}
{{- end -}}

{{/* Volume names the chart itself uses; extraVolumes and extraVolumeMounts may not reuse them. */}}
{{- define "kubexa.reservedVolumeNames" -}}
{{- list "config" "data" "tmp" "collector-token" "executor-tmp" "executor-token" "executor-socket" | toJson -}}
{{- end -}}

{{/* Paths the chart mounts; an extra mount at or under one of them would shadow it. */}}
{{- define "kubexa.reservedMountPaths" -}}
{{- list "/config" "/var/lib/kubexa" "/tmp" (include "kubexa.tokenMountPath" .) (include "kubexa.socketDir" .) | toJson -}}
{{- end -}}

{{- define "kubexa.guards" -}}
{{- include "kubexa.guardExtraRules" . -}}
{{- include "kubexa.guardIdentity" . -}}
{{- include "kubexa.guardExtras" . -}}
{{- include "kubexa.guardTransport" . -}}
{{- include "kubexa.guardUnimplemented" . -}}
{{- end -}}

{{/*
rbac.extraRules: read verbs only (the schema says so too), no resource starting with "*", no
subresource except the allow-list, and - matched the way RBAC matches, not by string equality -
nothing that covers a resource that reaches into containers, nodes or credentials.
*/}}
{{- define "kubexa.guardExtraRules" -}}
{{- $executor := include "kubexa.executorEnabled" . -}}
{{- $allowedSubresources := list "pods/log" -}}
{{- $reaching := list "pods/exec" "pods/attach" "pods/portforward" "pods/proxy" "nodes/proxy" "services/proxy" "serviceaccounts/token" "pods/ephemeralcontainers" "pods/eviction" "secrets" -}}
{{- range $i, $rule := .Values.rbac.extraRules -}}
{{- range $resource := $rule.resources -}}
{{- $resource = toString $resource -}}
{{- if hasPrefix "*" $resource -}}
{{- fail (printf "kubexa-agent: rbac.extraRules[%d].resources has %q; a resource starting with \"*\" covers subresources such as nodes/proxy and pods/exec. Name each resource (e.g. widgets), never a wildcard" $i $resource) -}}
{{- end -}}
{{- if and (contains "/" $resource) (not (has $resource $allowedSubresources)) -}}
{{- fail (printf "kubexa-agent: rbac.extraRules[%d].resources has %q; the only subresource the collector may be given is %s" $i $resource (join ", " $allowedSubresources)) -}}
{{- end -}}
{{- range $target := $reaching -}}
{{- if include "kubexa.rbacMatches" (dict "rule" $resource "target" $target) -}}
{{- if or (ne $target "secrets") $executor -}}
{{- fail (printf "kubexa-agent: rbac.extraRules[%d].resources has %q, which covers %s; the collector's identity never gets it%s" $i $resource $target (ternary " while an executor gate is on (the collector may not read Secrets then)" "" (eq $target "secrets"))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $verb := $rule.verbs -}}
{{- if not (has $verb (list "get" "list" "watch")) -}}
{{- fail (printf "kubexa-agent: rbac.extraRules[%d].verbs has %q; the collector's identity only reads (get, list, watch)" $i $verb) -}}
{{- end -}}
{{- end -}}
{{- range $url := $rule.nonResourceURLs -}}
{{- if contains "*" (toString $url) -}}
{{- fail (printf "kubexa-agent: rbac.extraRules[%d].nonResourceURLs has %q; name each URL, never a wildcard" $i (toString $url)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* serviceAccount.name: never the executor's, never the namespace's shared "default". */}}
{{- define "kubexa.guardIdentity" -}}
{{- $name := toString .Values.serviceAccount.name -}}
{{- if eq $name "default" -}}
{{- fail "kubexa-agent: serviceAccount.name=default is refused: the namespace's default ServiceAccount is shared by every Pod there, and the collector's ClusterRole would reach all of them. Leave serviceAccount.name empty (the chart creates one) or name a dedicated ServiceAccount" -}}
{{- end -}}
{{- if and (ne $name "") (eq $name (include "kubexa.executorName" .)) -}}
{{- fail (printf "kubexa-agent: serviceAccount.name=%s is the executor's ServiceAccount; the collector and the executor must never share an identity. Leave serviceAccount.name empty" $name) -}}
{{- end -}}
{{- $collectorUid := toString (dig "runAsUser" "" (.Values.podSecurityContext | default dict)) -}}
{{- if and (include "kubexa.executorEnabled" .) (eq $collectorUid (toString .Values.executor.runAsUser)) -}}
{{- fail (printf "kubexa-agent: executor.runAsUser=%s equals podSecurityContext.runAsUser (the collector's UID); the two containers must run as different users so the file modes of the socket and the token hold" $collectorUid) -}}
{{- end -}}
{{- end -}}

{{/*
extraEnv, extraVolumes, extraVolumeMounts, secret.existingSecret: no reserved volume name or
mount path, and nothing that names the executor's identity or carries a ServiceAccount token
(with a gate on, a projected token in the Pod is the executor's).
*/}}
{{- define "kubexa.guardExtras" -}}
{{- $reservedNames := include "kubexa.reservedVolumeNames" . | fromJsonArray -}}
{{- $reservedPaths := include "kubexa.reservedMountPaths" . | fromJsonArray -}}
{{- $executorName := include "kubexa.executorName" . -}}
{{- range $i, $volume := .Values.extraVolumes -}}
{{- if has (toString $volume.name) $reservedNames -}}
{{- fail (printf "kubexa-agent: extraVolumes[%d].name=%s is reserved by the chart (%s); choose another name" $i (toString $volume.name) (join ", " $reservedNames)) -}}
{{- end -}}
{{- $json := toJson $volume -}}
{{- if contains "serviceAccountToken" $json -}}
{{- fail (printf "kubexa-agent: extraVolumes[%d] projects a serviceAccountToken; the chart alone decides which container holds which identity's token" $i) -}}
{{- end -}}
{{- if contains $executorName $json -}}
{{- fail (printf "kubexa-agent: extraVolumes[%d] refers to %s, the executor's identity; the collector must never hold the executor's credentials" $i $executorName) -}}
{{- end -}}
{{- end -}}
{{- range $i, $mount := .Values.extraVolumeMounts -}}
{{- if has (toString $mount.name) $reservedNames -}}
{{- fail (printf "kubexa-agent: extraVolumeMounts[%d].name=%s is a volume reserved by the chart (%s); the collector may not mount it again" $i (toString $mount.name) (join ", " $reservedNames)) -}}
{{- end -}}
{{- $path := trimSuffix "/" (toString $mount.mountPath) -}}
{{- range $reserved := $reservedPaths -}}
{{- if or (eq $path $reserved) (hasPrefix (printf "%s/" $reserved) $path) (hasPrefix (printf "%s/" $path) $reserved) -}}
{{- fail (printf "kubexa-agent: extraVolumeMounts[%d].mountPath=%s overlaps %s, which the chart mounts; choose another path" $i (toString $mount.mountPath) $reserved) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $i, $env := .Values.extraEnv -}}
{{- $json := toJson $env -}}
{{- if contains $executorName $json -}}
{{- fail (printf "kubexa-agent: extraEnv[%d] refers to %s, the executor's identity; the collector must never hold the executor's credentials" $i $executorName) -}}
{{- end -}}
{{- if contains "serviceaccount" (lower $json) -}}
{{- fail (printf "kubexa-agent: extraEnv[%d] refers to a ServiceAccount token; the chart alone decides which container holds which identity's token" $i) -}}
{{- end -}}
{{- end -}}
{{- $existing := toString .Values.secret.existingSecret -}}
{{- if and (ne $existing "") (hasPrefix $executorName $existing) -}}
{{- fail (printf "kubexa-agent: secret.existingSecret=%s belongs to the executor's identity; the collector would send it to the gateway as its tenant token. Name the Secret that holds the tenant token" $existing) -}}
{{- end -}}
{{- end -}}

{{/* gateway.tls=false and gateway.insecureSkipVerify=true need gateway.allowInsecure=true. */}}
{{- define "kubexa.guardTransport" -}}
{{- $gw := .Values.gateway | default dict -}}
{{- $plaintext := eq (toString $gw.tls) "false" -}}
{{- $unverified := eq (toString $gw.insecureSkipVerify) "true" -}}
{{- $profile := dig "profile" "default" (.Values.security | default dict) -}}
{{- if and (eq $profile "strict") (or $plaintext $unverified (eq (toString $gw.allowInsecure) "true")) -}}
{{- fail "kubexa-agent: security.profile=strict refuses gateway.tls=false, gateway.insecureSkipVerify=true and gateway.allowInsecure=true; connect to the gateway over verified TLS (gateway.caCertPath for a private CA)" -}}
{{- end -}}
{{- if and (or $plaintext $unverified) (ne (toString $gw.allowInsecure) "true") -}}
{{- fail (printf "kubexa-agent: %s sends the tenant token and cluster data where anyone on the path can read or alter them; set gateway.allowInsecure=true to acknowledge that (development gateways only), or use verified TLS" (ternary "gateway.tls=false" "gateway.insecureSkipVerify=true" $plaintext)) -}}
{{- end -}}
{{- end -}}

{{/*
A privileged gate whose feature the executor does not implement yet is refused, unless
executor.renderUnimplemented=true (for the identity and socket tests: the executor container and
its token minting render, the gate's RBAC does not).
*/}}
{{- define "kubexa.guardUnimplemented" -}}
{{- range $gate, $feature := dict "exec" "exec" "nodeShell" "nodeShell" "nodeOps" "nodeOps" "write" "write" -}}
{{- if and (index $.Values.rbac $gate) (not (include "kubexa.featureImplemented" $feature)) (not $.Values.executor.renderUnimplemented) -}}
{{- fail (printf "kubexa-agent: rbac.%s=true is refused: this version of the executor does not implement that feature yet, so the chart would grant a permission no code uses. Set rbac.%s=false (executor.renderUnimplemented=true renders the executor without the gate's RBAC, for tests only)" $gate $gate) -}}
{{- end -}}
{{- end -}}
{{- end -}}
