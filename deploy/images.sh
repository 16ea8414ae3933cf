#!/bin/sh
# images.sh: `make images`. Builds the fleet's images herald:local and
# herald-nats:local with no registry: static binaries built here (this
# repository and the Go module proxy), laid out by rootfs.sh, and the final
# stages of deploy/Dockerfile on top of a stage `build` FROM scratch that
# holds them. Works with the legacy builder (Docker Engine 20.10, no buildx).
# Environment: GO (go), DOCKER (docker), HERALD_IMAGE, NATS_IMAGE, CA_CERTS.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go} DOCKER=${DOCKER:-docker}
HERALD_IMAGE=${HERALD_IMAGE:-herald:local} NATS_IMAGE=${NATS_IMAGE:-herald-nats:local}
CA_CERTS=${CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}
[ -r "$CA_CERTS" ] || { echo "images: no CA bundle at $CA_CERTS (apt-get install ca-certificates, or set CA_CERTS)" >&2; exit 1; }

ctx=$(mktemp -d "${TMPDIR:-/tmp}/herald-images.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
# nats-server at the version the tests embed (pkg/go.mod), from its module.
(cd "$root" && CGO_ENABLED=0 "$GO" build -trimpath -buildvcs=false -ldflags='-s -w' -o "$ctx/bin/" \
	./services/cmd/... github.com/nats-io/nats-server/v2)
sh "$root/deploy/rootfs.sh" "$ctx/rootfs" "$ctx/bin" "$CA_CERTS"
rm -rf "$ctx/bin"

marker='^# ---- runtime stages'
grep -q "$marker" "$root/deploy/Dockerfile" || { echo "images: deploy/Dockerfile has no line matching '$marker'" >&2; exit 1; }
{
	echo 'FROM scratch AS build'
	echo 'COPY rootfs/ /rootfs/'
	sed -n "/$marker/,\$p" "$root/deploy/Dockerfile"
} >"$ctx/Dockerfile"

# DOCKER_BUILDKIT=0: the legacy builder, which needs no buildx and pulls
# nothing for FROM scratch. Its output (and its deprecation notice) is shown
# only when it fails.
build() {
	if ! out=$(DOCKER_BUILDKIT=0 "$DOCKER" build -q "$@" 2>&1); then
		printf '%s\n' "$out" >&2
		exit 1
	fi
}
# The stage build (the binaries, ~90 MB) is tagged only to be removed after:
# the images copy from it, they are not built on it.
stage=herald-images-build:$(basename "$ctx" | tr 'A-Z' 'a-z')
build --target build -t "$stage" "$ctx"
build --target nats -t "$NATS_IMAGE" "$ctx"
build --target herald -t "$HERALD_IMAGE" "$ctx"
"$DOCKER" rmi "$stage" >/dev/null
"$DOCKER" image ls --format '{{.Repository}}:{{.Tag}}  {{.Size}}' | grep -x -e "$HERALD_IMAGE .*" -e "$NATS_IMAGE .*" || true
