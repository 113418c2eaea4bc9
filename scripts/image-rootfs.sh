#!/bin/sh
# Assembles a runtime image's whole root filesystem in <out>, in the build stage: the Node binary
# of the build image (so the runtime runs exactly the Node the native module was compiled against),
# the shared libraries it and the given native addons load (found with ldd, so nothing else of the
# distribution ships: no shell, no package manager, no npm), their Debian copyright files, and a
# passwd/group naming the numeric users the chart runs as. Writes <out>.os-packages with each
# Debian package a library came from and its version, for the SBOM.
#
#   sh scripts/image-rootfs.sh <out> [native addon ...]
set -eu
out=$1
shift
mkdir -p "$out/usr/local/bin" "$out/etc" "$out/tmp"
chmod 1777 "$out/tmp"
cp /usr/local/bin/node "$out/usr/local/bin/node"
: >"$out.libs"
for elf in /usr/local/bin/node "$@"; do
  # "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and "/lib64/ld-linux-x86-64.so.2 (0x...)"
  ldd "$elf" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' >>"$out.libs"
done
# The Debian package a library belongs to. With merged /usr, dpkg records some files under /lib
# (libc6) and some under /usr/lib (libstdc++6): ask for the path ldd printed, the resolved one,
# and the resolved one without /usr.
owning_package() {
  real=$(readlink -f "$1")
  for path in "$1" "$real" "${real#/usr}"; do
    if found=$(dpkg-query -S "$path" 2>/dev/null); then
      echo "$found" | head -n1 | cut -d: -f1
      return
    fi
  done
}
: >"$out.os-packages"
for lib in $(sort -u "$out.libs"); do
  mkdir -p "$out$(dirname "$lib")"
  cp -L "$lib" "$out$lib"
  pkg=$(owning_package "$lib")
  if [ -n "$pkg" ]; then
    echo "$pkg $(dpkg-query -W -f '${Version}' "$pkg")" >>"$out.os-packages"
    if [ -f "/usr/share/doc/$pkg/copyright" ]; then
      mkdir -p "$out/usr/share/doc/$pkg"
      cp "/usr/share/doc/$pkg/copyright" "$out/usr/share/doc/$pkg/copyright"
    fi
  fi
done
sort -u -o "$out.os-packages" "$out.os-packages"
rm "$out.libs"
# The chart's users: 65532 the collector, 65533 the executor (values.yaml); the group 65532 is the
# Pod's fsGroup, shared by both for the socket.
cat >"$out/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
collector:x:65532:65532:kubexa collector:/nonexistent:/sbin/nologin
executor:x:65533:65533:kubexa executor:/nonexistent:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
PASSWD
cat >"$out/etc/group" <<'GROUP'
root:x:0:
collector:x:65532:
executor:x:65533:
nogroup:x:65534:
GROUP
