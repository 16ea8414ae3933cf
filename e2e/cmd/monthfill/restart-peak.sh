#!/bin/bash
# restart-peak.sh STORE NATS_CONF NATS_SERVER [GOMEMLIMIT]: the memory of a
# nats-server restarted on a month's state (a store that monthfill filled,
# under a nats.conf whose store_dir is STORE and whose http port is 8222 on
# 127.0.0.1): it starts the server on a copy of STORE, kills it with SIGKILL
# after 90 s, starts it again, and prints the peak RSS of each start, when
# the second was healthy (/healthz 200), and its RSS at 240 s.
set -eu
store=$1 conf=$2 nats=$3 lim=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -a "$store" "$work/store"
sed "s#store_dir: .*#store_dir: \"$work/store\"#" "$conf" > "$work/nats.conf"
start() { if [ -n "$lim" ]; then GOMEMLIMIT=$lim "$nats" -c "$work/nats.conf" >>"$work/log" 2>&1 & else "$nats" -c "$work/nats.conf" >>"$work/log" 2>&1 & fi; echo $!; }
sample() { # pid seconds file: "second rss_kB http_status" each second
	for i in $(seq 1 "$2"); do
		echo "$i $(awk '/^VmRSS/{print $2}' /proc/$1/status 2>/dev/null) $(curl -s -m 1 -o /dev/null -w '%{http_code}' http://127.0.0.1:8222/healthz)" >>"$3"
		sleep 1
	done
}
pid=$(start); sample "$pid" 90 "$work/first"
kill -9 "$pid"; sleep 1
pid=$(start); sample "$pid" 240 "$work/crash"
kill "$pid"; wait "$pid" || true
awk '{if($2>m){m=$2;at=$1}}END{printf "start: peak %.0f MiB at %d s\n", m/1024, at}' "$work/first"
awk '{if($2>m){m=$2;at=$1}; if(!h && $3=="200"){h=$1}}END{printf "after SIGKILL: peak %.0f MiB at %d s, healthy at %s s, %.0f MiB at %d s\n", m/1024, at, h, $2/1024, $1}' "$work/crash"
