#!/usr/bin/env bash
# Quick-start command 1: install, build, start certmountd on a local socket
# with the embedded local CA, publish a sample volume through the socket as
# kubelet would, and print the certificate and the node state.
# Pass --keep-running to leave the driver and the volume in place.
set -euo pipefail
cd "$(dirname "$0")/.."
keep_running=false
[ "${1:-}" = "--keep-running" ] && keep_running=true

bash scripts/build.sh
demo=/tmp/certmount-demo
socket=$demo/csi.sock
data=$demo/data
pods=$demo/pods
target=$pods/0b5c1c8e-demo/volumes/kubernetes.io~csi/tls/mount
volume=csi-$(printf demo | sha256sum | cut -c1-16)

# A previous run's driver, if any, is stopped first; its state is kept, so
# this also shows a restart's startup cleanup.
if [ -f "$demo/certmountd.pid" ] && kill -0 "$(cat "$demo/certmountd.pid")" 2>/dev/null; then
  kill "$(cat "$demo/certmountd.pid")"; sleep 1
fi
mkdir -p "$(dirname "$target")"

./build/certmountd --endpoint "unix://$socket" --node-id "$(hostname)" \
  --data-root "$data" --target-root "$pods" >"$demo/certmountd.log" 2>&1 &
echo $! >"$demo/certmountd.pid"
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.1; done

ctl() { ./build/certmountctl --endpoint "unix://$socket" "$@"; }
echo "== certmountctl info"; ctl info
echo "== certmountctl publish"
ctl publish --volume-id "$volume" --target-path "$target" \
  --pod-name web-0 --pod-namespace default --service-account web \
  -a csi.cert-manager.io/issuer-name=local \
  -a 'csi.cert-manager.io/dns-names=${POD_NAME}.${POD_NAMESPACE}.svc.cluster.local' \
  -a csi.cert-manager.io/key-usages='digital signature,server auth' \
  -a csi.cert-manager.io/duration=24h

echo "== files in the pod's view ($target)"; ls -l "$target"/
echo "== tls.crt"
openssl x509 -in "$target/tls.crt" -noout -subject -issuer -serial -dates -ext subjectAltName,extendedKeyUsage
# As of date's realtime second: openssl's own time() reads the coarse clock,
# up to a tick behind the second the CA stamped as notBefore.
openssl verify -attime "$(date +%s)" -CAfile "$target/ca.crt" "$target/tls.crt"
echo "== node state: sqlite3 $data/state.db 'select * from volume_status'"
sqlite3 -header -column "$data/state.db" 'select * from volume_status'

if ! $keep_running; then
  echo "== certmountctl unpublish"; ctl unpublish --volume-id "$volume" --target-path "$target"
  kill "$(cat "$demo/certmountd.pid")"; wait "$(cat "$demo/certmountd.pid")" 2>/dev/null || true
  echo "== driver log"; cat "$demo/certmountd.log"
else
  echo "certmountd keeps running (pid $(cat "$demo/certmountd.pid")), socket $socket"
fi
