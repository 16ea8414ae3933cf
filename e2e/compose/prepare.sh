#!/bin/sh
# prepare.sh: what `make compose-test` needs besides Go, installed when
# missing, and the path of a Compose v2 binary on stdout (all else goes to
# stderr):
#   - dockerd, containerd and runc: Debian's docker.io (Engine 20.10), from
#     the package registry;
#   - a docker CLI (docker.io has one);
#   - Compose v2: an installed v2 plugin, else one built from the Go module
#     proxy (github.com/docker/compose/v2@COMPOSE_VERSION) and cached in
#     ${XDG_CACHE_HOME:-~/.cache}/herald/ (about 130 s the first time).
set -eu
COMPOSE_VERSION=${COMPOSE_VERSION:-v2.40.3}
GO=${GO:-go}

if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
	echo "compose-test: installing docker.io (dockerd, containerd, runc) from the Debian registry" >&2
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "compose-test: dockerd is missing and cannot be installed here (needs root and apt-get)" >&2
		exit 1
	fi
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >&2
fi

is_v2() { [ -x "$1" ] && "$1" version 2>/dev/null | grep -q 'version v2\.'; }
cache=${XDG_CACHE_HOME:-$HOME/.cache}/herald
cached=$cache/docker-compose-$COMPOSE_VERSION
for p in "${COMPOSE_PLUGIN:-}" "$cached" "$HOME/.docker/cli-plugins/docker-compose" \
	/usr/libexec/docker/cli-plugins/docker-compose /usr/lib/docker/cli-plugins/docker-compose \
	/usr/local/lib/docker/cli-plugins/docker-compose; do
	if [ -n "$p" ] && is_v2 "$p"; then
		echo "$p"
		exit 0
	fi
done

echo "compose-test: building Compose $COMPOSE_VERSION from the Go module proxy (cached in $cache)" >&2
dir=$(cd / && GOWORK=off GOFLAGS=-mod=mod "$GO" mod download -json "github.com/docker/compose/v2@$COMPOSE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$dir" ] || { echo "compose-test: go mod download github.com/docker/compose/v2@$COMPOSE_VERSION failed" >&2; exit 1; }
mkdir -p "$cache"
# Its go.mod has exclude directives, so it does not `go install`: build it
# as the main module, in its own directory.
(cd "$dir" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 "$GO" build -trimpath \
	-ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION" \
	-o "$cached.tmp" ./cmd) >&2
mv "$cached.tmp" "$cached"
is_v2 "$cached" || { echo "compose-test: the Compose built in $cached does not say it is v2" >&2; exit 1; }
echo "$cached"
