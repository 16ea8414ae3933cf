#!/bin/sh
# rootfs.sh OUT BIN CA_CERTS: lays out the files of the Herald and NATS images
# under OUT from the static binaries in BIN (herald, switchboard, messenger,
# butler, nats-server) and a CA bundle. deploy/Dockerfile runs it in its build
# stage; `make images` runs it on the host with binaries built there. Both
# then build the same final stages of deploy/Dockerfile from OUT, so the
# images hold the same files whichever way they were made.
#
#   OUT/base/    what both images share (one layer): /etc/passwd and
#                /etc/group with the user herald (65532), the CA bundle for
#                Telegram, SMTP and webhooks over TLS, and /usr/local/bin/herald
#                (the services' health checks and NATS's run `herald healthcheck`,
#                as neither image has a shell)
#   OUT/herald/  switchboard, messenger, butler
#   OUT/nats/    nats-server
#   OUT/data/    the empty store directory, owned by herald in the image
set -eu
out=$1 bin=$2 certs=$3
rm -rf "$out"
mkdir -p "$out/base/etc/ssl/certs" "$out/base/usr/local/bin" "$out/herald/usr/local/bin" \
	"$out/nats/usr/local/bin" "$out/data"
echo 'herald:x:65532:65532:herald:/nonexistent:/sbin/nologin' >"$out/base/etc/passwd"
echo 'herald:x:65532:' >"$out/base/etc/group"
cp "$certs" "$out/base/etc/ssl/certs/ca-certificates.crt"
cp "$bin/herald" "$out/base/usr/local/bin/"
cp "$bin/switchboard" "$bin/messenger" "$bin/butler" "$out/herald/usr/local/bin/"
cp "$bin/nats-server" "$out/nats/usr/local/bin/"
chmod -R a+rX,go-w "$out"
