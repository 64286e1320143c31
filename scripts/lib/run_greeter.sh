#!/usr/bin/env bash
# Runs the greeter example: starts its service on a free port, runs the
# client against it, stops the service. Exit status is the client's.
# Usage: scripts/lib/run_greeter.sh <greeter build dir>
set -uo pipefail
dir="$1"
coproc SVC { exec "$dir/greeter_service" 127.0.0.1:0; }
svc_pid=$SVC_PID
if ! read -r -t 30 -u "${SVC[0]}" _ port; then
  echo "greeter: the service did not report its port" >&2
  kill -9 "$svc_pid" 2>/dev/null
  exit 1
fi
"$dir/greeter_client" "127.0.0.1:$port"
rc=$?
eval "exec ${SVC[1]}>&-"
wait "$svc_pid" 2>/dev/null
exit $rc
