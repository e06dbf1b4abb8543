#!/usr/bin/env bash
# Builds the certmountd image from the Dockerfile with podman, without a
# registry, and smoke-tests it: --version, the ldd check, and a real publish
# through the CSI socket from inside the running container onto a scratch
# directory of this host, checked from the host (files, signature, and a
# read-only mount that reached the host through shared propagation).
#
#   bash scripts/image.sh [image]     (default certmount/certmountd:<version>)
#
# Needs root. Installs podman, runc and mmdebstrap when missing; when no debian:12
# image is present, makes one with mmdebstrap (minbase bookworm) from the
# host's apt sources, so no registry is ever asked. CERTMOUNT_WERROR=ON is
# passed to the build (CI); a plain `podman build .` leaves warnings warnings.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^project(certmount VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
image=${1:-certmount/certmountd:$version}
# runc, not Debian's default crun: crun refuses hosts whose cgroups are in
# hybrid mode. runc cannot raise podman's default rlimits in some sandboxes
# (the CI machines among them); these fit.
podman() { command podman --runtime runc "$@"; }
limits=(--ulimit nofile=20000:20000 --ulimit nproc=4096:4096)

missing=()
for p in podman runc buildah mmdebstrap uidmap; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "image: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! podman image exists debian:12; then
  echo "image: making debian:12 with mmdebstrap"
  mmdebstrap --quiet --variant=minbase bookworm - | podman import - debian:12
fi

echo "image: building $image"
podman build "${limits[@]}" --build-arg CERTMOUNT_WERROR=ON -t "$image" .

echo "image: certmountd --version"
podman run --rm "${limits[@]}" "$image" --version
echo "image: every shared library resolves"
podman run --rm "${limits[@]}" --entrypoint sh "$image" -c \
  '! ldd /usr/local/bin/certmountd /usr/local/bin/certmountctl | grep "not found"'

# A publish from inside the container. The scratch root is a shared mount
# bind-mounted rshared into the container, like the DaemonSet's
# Bidirectional kubelet directory, so the bind mount appears on the host.
scratch=$(mktemp -d /tmp/certmount-image.XXXXXX)
name=certmount-smoke-$$
cleanup() {
  podman rm -f -t 5 "$name" >/dev/null 2>&1 || true
  umount -R "$scratch" 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT
mount --bind "$scratch" "$scratch"
mount --make-shared "$scratch"
mkdir -p "$scratch/pods"
podman run -d --name "$name" --privileged "${limits[@]}" \
  -v "$scratch:$scratch:rshared" "$image" \
  --endpoint "unix://$scratch/csi.sock" --node-id smoke \
  --data-root "$scratch/data" --target-root "$scratch/pods" >/dev/null
for _ in $(seq 100); do [ -S "$scratch/csi.sock" ] && break; sleep 0.1; done
[ -S "$scratch/csi.sock" ] || { podman logs "$name"; exit 1; }

target=$scratch/pods/0b5c1c8e-smoke/volumes/kubernetes.io~csi/tls/mount
volume=csi-$(printf smoke | sha256sum | cut -c1-16)
mkdir -p "$target"
ctl() { podman exec "$name" certmountctl --endpoint "unix://$scratch/csi.sock" "$@"; }
echo "image: publish through the socket, inside the container"
ctl publish --volume-id "$volume" --target-path "$target" \
  --pod-name web-0 --pod-namespace default --service-account web \
  -a csi.cert-manager.io/issuer-name=local -a csi.cert-manager.io/dns-names=web-0.default
echo "image: the host sees the certificate, on a read-only mount"
# As of date's realtime second: openssl's own time() reads the coarse clock,
# up to a tick behind the second the CA stamped as notBefore.
openssl verify -attime "$(date +%s)" -CAfile "$target/ca.crt" "$target/tls.crt"
options=$(findmnt -n -o OPTIONS --mountpoint "$target")
echo "host mount options: $options"
for option in ro nosuid nodev noexec; do
  [[ ",$options," == *",$option,"* ]] || { echo "image: host copy lacks $option" >&2; exit 1; }
done
ctl unpublish --volume-id "$volume" --target-path "$target"
! findmnt --mountpoint "$target" >/dev/null
echo "image: $image passed"
