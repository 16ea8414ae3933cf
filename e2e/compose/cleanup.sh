#!/bin/sh
# cleanup.sh: removes what a compose test run left when it could not clean up
# itself (killed, or stopped by go test's -timeout): its dockerd, the FORWARD
# rules and bridge of its network, its mounts and its directory. The run
# records its directory in ${TMPDIR:-/tmp}/herald-compose-test.dir.
# make compose-test runs it after the test, whatever the test's outcome.
set -u
state=${TMPDIR:-/tmp}/herald-compose-test.dir
[ -f "$state" ] || exit 0
work=$(cat "$state")
bridge=hrldct0
pidfile=$work/dockerd.pid
if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
	pid=$(cat "$pidfile")
	echo "compose-test cleanup: stopping the test's dockerd ($pid)" >&2
	DOCKER_HOST=unix://$work/docker.sock docker ps -q 2>/dev/null | xargs -r env DOCKER_HOST=unix://$work/docker.sock docker kill >/dev/null 2>&1
	kill "$pid"
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 30 ]; do sleep 1; i=$((i + 1)); done
	kill -9 "$pid" 2>/dev/null
fi
# The containerd dockerd started, and its shims, if dockerd could not stop
# them: only processes under this run's own directory.
for p in $(pgrep -f -- "$work/exec/containerd" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
for rule in "-i $bridge -o $bridge -j ACCEPT" "-i $bridge -j DROP" "-o $bridge -j DROP"; do
	# shellcheck disable=SC2086 # the rule is words
	while iptables -D FORWARD $rule 2>/dev/null; do :; done
done
ip link delete "$bridge" 2>/dev/null
case $work in
*/herald-compose-test-*)
	grep -o " $work/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
	rm -rf "$work"
	;;
esac
rm -f "$state"
