#!/usr/bin/env bash
# Packages helm/kubexa-agent into dist/ and renders dist/kubexa-agent.yaml, a single-file manifest
# for `kubectl apply` users (namespace "kubexa", read-only defaults, token from an existing Secret).
#   scripts/package-chart.sh                  helm from PATH, or the test cluster's cached helm
#   HELM=/path/to/helm scripts/package-chart.sh
#   NAMESPACE=monitoring scripts/package-chart.sh -f my-values.yaml   (extra args go to helm template)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
chart="$repo/helm/kubexa-agent"
dist=${DIST:-$repo/dist}
namespace=${NAMESPACE:-kubexa}
release=${RELEASE:-kubexa-agent}

if [[ -z "${HELM:-}" ]]; then
  if command -v helm >/dev/null; then
    HELM=helm
  else
    HELM="$(bash "$repo/test/cluster/build.sh" | tail -1)/helm"
  fi
fi

mkdir -p "$dist"
"$HELM" lint --strict "$chart" --set secret.tenantToken=lint >&2
"$HELM" package "$chart" --destination "$dist" >&2

version=$(sed -n 's/^version: *//p' "$chart/Chart.yaml")
manifest="$dist/kubexa-agent.yaml"
{
  echo "# kubexa-agent $version: rendered from helm/kubexa-agent for kubectl apply."
  echo "# Before applying, create the tenant token Secret:"
  echo "#   kubectl create namespace $namespace"
  echo "#   kubectl -n $namespace create secret generic $release-token --from-literal=tenant-token=<token>"
  echo "# Defaults: read-only collector, no executor. Re-render with helm for anything else."
  echo "---"
  echo "apiVersion: v1"
  echo "kind: Namespace"
  echo "metadata:"
  echo "  name: $namespace"
  "$HELM" template "$release" "$chart" --namespace "$namespace" \
    --set secret.create=false "$@"
} >"$manifest.tmp"
mv "$manifest.tmp" "$manifest"
echo "$dist/kubexa-agent-$version.tgz"
echo "$manifest"
