#!/usr/bin/env bash
# scaleout-test.sh BINDIR: runs Peakline's remote-storage tests against
# Grafana Mimir (monolithic, filesystem backend) and Thanos (receive +
# query), each started here on loopback with temp dirs and stopped after
# its tests, for make test-scaleout. BINDIR holds mimir and thanos
# (scripts/scaleout-build.sh).
#
# Each engine's URLs reach the tests through the environment:
#   PEAKLINE_TEST_REMOTE_ENGINE     mimir | thanos
#   PEAKLINE_TEST_REMOTE_WRITE_URL  the remote-write 1.0 endpoint
#   PEAKLINE_TEST_REMOTE_QUERY_URL  the base Peakline appends /api/v1/query etc. to
# (not PEAKLINE_REMOTE_*: every serve flag is read from PEAKLINE_<FLAG>, so
# those names would reconfigure any serve the tests start.)
#
# The start commands are the ones README's "Scaling out" section gives, with
# what an operator changes for Peakline:
#   - the out-of-order window: a job imported or re-sent after the engine
#     has newer samples lies more than an hour before the engine's newest
#     sample, which a Prometheus-TSDB head refuses ("out of bounds" /
#     "sample too old") unless the window covers it;
#   - Mimir's ingestion rate (10,000 samples/s per tenant by default) and
#     in-memory series limit (150,000): one 200-task job at 4 Hz is 800
#     series, and an import sends a whole job in seconds;
#   - Mimir's -querier.query-ingesters-within=0: an old job backfilled
#     minutes ago sits in the ingesters until its block ships, and the
#     default (13h) would not ask them for it.
#
# Env: SCALEOUT_ENGINES (default "mimir thanos"), SCALEOUT_TESTS (go test
# -run pattern, default the replica tests of e2e/remote_e2e_test.go and the
# backfill test of e2e/remote_scaleout_test.go),
# SCALEOUT_PKGS (default ./e2e/, the end-to-end tests), OOO_WINDOW (default 87600h,
# ten years: any test tree), GO.
set -euo pipefail

bindir=$(cd "${1:?usage: scaleout-test.sh BINDIR}" && pwd)
GO=${GO:-go}
ENGINES=${SCALEOUT_ENGINES:-mimir thanos}
TESTS=${SCALEOUT_TESTS:-^TestRemote(Replica|Backfill)}
PKGS=${SCALEOUT_PKGS:-./e2e/}
OOO_WINDOW=${OOO_WINDOW:-87600h}

work=$(mktemp -d "${TMPDIR:-/tmp}/peakline-scaleout.XXXXXX")
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	pids=()
}
trap 'cleanup; rm -rf "$work"' EXIT

# freeport prints a loopback TCP port that was free a moment ago.
freeport() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start NAME LOG CMD...: starts a process in the background in the
# directory of LOG (Thanos query writes its active-query log to its working
# directory), remembered for cleanup.
start() {
	local name=$1 log=$2
	shift 2
	echo "scaleout: start $name: $*"
	(cd "$(dirname "$log")" && exec "$@") >"$log" 2>&1 &
	pids+=($!)
}

# wait_for NAME LOG URL [GREP]: waits up to 3 minutes until URL answers 200
# (and its body matches GREP, if given).
wait_for() {
	local name=$1 log=$2 url=$3 pattern=${4:-} body i
	for ((i = 0; i < 1800; i++)); do
		if body=$(curl -fsS --max-time 2 "$url" 2>/dev/null) && { [ -z "$pattern" ] || grep -q -- "$pattern" <<<"$body"; }; then
			return 0
		fi
		for p in "${pids[@]}"; do
			if ! kill -0 "$p" 2>/dev/null; then
				echo "scaleout: $name exited before it was ready:" >&2
				tail -n 40 "$log" >&2
				return 1
			fi
		done
		sleep 0.1
	done
	echo "scaleout: $name not ready after 3 minutes ($url):" >&2
	tail -n 40 "$log" >&2
	return 1
}

# Mimir monolithic (-target=all): every ring in memory on 127.0.0.1 (one
# process), blocks on the local filesystem, no multi-tenancy (the tenant
# is "anonymous"). Push at /api/v1/push, the Prometheus API under
# /prometheus.
start_mimir() {
	local d=$work/mimir http grpc
	mkdir -p "$d"
	http=$(freeport)
	grpc=$(freeport)
	start mimir "$d/log" "$bindir/mimir" \
		-target=all -auth.multitenancy-enabled=false \
		-server.http-listen-address=127.0.0.1 -server.http-listen-port="$http" \
		-server.grpc-listen-address=127.0.0.1 -server.grpc-listen-port="$grpc" \
		-blocks-storage.backend=filesystem -blocks-storage.filesystem.dir="$d/blocks" \
		-blocks-storage.tsdb.dir="$d/tsdb" -blocks-storage.bucket-store.sync-dir="$d/tsdb-sync" \
		-compactor.data-dir="$d/compactor" \
		-ruler-storage.backend=filesystem -ruler-storage.filesystem.dir="$d/rules" \
		-ingester.ring.store=inmemory -ingester.ring.replication-factor=1 -ingester.ring.instance-addr=127.0.0.1 \
		-distributor.ring.store=inmemory -distributor.ring.instance-addr=127.0.0.1 \
		-compactor.ring.store=inmemory -compactor.ring.instance-addr=127.0.0.1 \
		-store-gateway.sharding-ring.store=inmemory -store-gateway.sharding-ring.replication-factor=1 \
		-store-gateway.sharding-ring.instance-addr=127.0.0.1 \
		-ruler.ring.store=inmemory -ruler.ring.instance-addr=127.0.0.1 \
		-querier.ring.store=inmemory -querier.ring.instance-addr=127.0.0.1 \
		-query-frontend.instance-addr=127.0.0.1 \
		-ingester.out-of-order-time-window="$OOO_WINDOW" \
		-querier.query-ingesters-within=0 \
		-distributor.ingestion-rate-limit=10000000 -distributor.ingestion-burst-size=20000000 \
		-ingester.max-global-series-per-user=0 \
		-log.level=warn
	wait_for mimir "$d/log" "http://127.0.0.1:$http/ready"
	export PEAKLINE_TEST_REMOTE_WRITE_URL="http://127.0.0.1:$http/api/v1/push"
	export PEAKLINE_TEST_REMOTE_QUERY_URL="http://127.0.0.1:$http/prometheus"
}

# Thanos: receive stores (its own Prometheus TSDB, no object storage
# here: nothing is uploaded), query answers the Prometheus API over it.
# Every series read back carries receive's external labels: the replica
# label given with --label (which query, told it is a replica label,
# drops) and tenant_id="default-tenant" (kept). Peakline reads only the
# labels of its schema, so tenant_id neither splits a job's series nor
# shows in a payload; the tests check the payloads are the embedded ones.
start_thanos() {
	local d=$work/thanos rgrpc rhttp rwrite qhttp qgrpc
	mkdir -p "$d"
	rgrpc=$(freeport)
	rhttp=$(freeport)
	rwrite=$(freeport)
	qhttp=$(freeport)
	qgrpc=$(freeport)
	start thanos-receive "$d/receive.log" "$bindir/thanos" receive \
		--tsdb.path="$d/receive" --tsdb.retention=100y \
		--grpc-address=127.0.0.1:"$rgrpc" --http-address=127.0.0.1:"$rhttp" \
		--remote-write.address=127.0.0.1:"$rwrite" \
		--label='receive_replica="0"' \
		--tsdb.out-of-order.time-window="$OOO_WINDOW" \
		--log.level=warn
	wait_for thanos-receive "$d/receive.log" "http://127.0.0.1:$rhttp/-/ready"
	start thanos-query "$d/query.log" "$bindir/thanos" query \
		--http-address=127.0.0.1:"$qhttp" --grpc-address=127.0.0.1:"$qgrpc" \
		--endpoint=127.0.0.1:"$rgrpc" \
		--query.replica-label=receive_replica \
		--log.level=warn
	wait_for thanos-query "$d/query.log" "http://127.0.0.1:$qhttp/-/ready"
	# The query learns its stores a few seconds after it is ready.
	wait_for thanos-query "$d/query.log" "http://127.0.0.1:$qhttp/api/v1/stores" "127.0.0.1:$rgrpc"
	export PEAKLINE_TEST_REMOTE_WRITE_URL="http://127.0.0.1:$rwrite/api/v1/receive"
	export PEAKLINE_TEST_REMOTE_QUERY_URL="http://127.0.0.1:$qhttp"
}

status=0
for engine in $ENGINES; do
	case $engine in
	mimir) start_mimir ;;
	thanos) start_thanos ;;
	*)
		echo "scaleout: unknown engine $engine (mimir, thanos)" >&2
		exit 2
		;;
	esac
	export PEAKLINE_TEST_REMOTE_ENGINE=$engine
	echo "scaleout: $engine: write $PEAKLINE_TEST_REMOTE_WRITE_URL, query $PEAKLINE_TEST_REMOTE_QUERY_URL"
	# -v: a run in which every test skipped (or none matched) is a
	# failure here, not a pass.
	$GO test -count=1 -v -timeout 20m -run "$TESTS" $PKGS >"$work/$engine/test.log" 2>&1 || true
	grep -E '^\s*--- |^(PASS|FAIL|ok|panic)|_test.go:[0-9]+:' "$work/$engine/test.log" || true
	if grep -qE '^(FAIL|panic)|--- FAIL' "$work/$engine/test.log" || ! grep -qE -- "--- PASS: [^ ]+/$engine " "$work/$engine/test.log"; then
		echo "scaleout: $engine: tests failed or none ran against it; test output and engine logs kept under $work/$engine" >&2
		status=1
		trap cleanup EXIT
	fi
	cleanup
done
exit $status
