#!/usr/bin/env bash
# Runs one example: starts its service command with the address
# 127.0.0.1:0 appended, reads the "PORT <n>" line it prints, runs the client
# command with 127.0.0.1:<n> appended, then stops the service by closing its
# standard input. Exit status is the client's.
# Usage: scripts/lib/run_example.sh "<service command>" "<client command>"
set -uo pipefail
read -r -a svc_cmd <<<"$1"
read -r -a client_cmd <<<"$2"
coproc SVC { exec "${svc_cmd[@]}" 127.0.0.1:0; }
svc_pid=$SVC_PID
if ! read -r -t 30 -u "${SVC[0]}" _ port; then
  echo "${svc_cmd[0]}: the service did not report its port" >&2
  kill -9 "$svc_pid" 2>/dev/null
  exit 1
fi
"${client_cmd[@]}" "127.0.0.1:$port"
rc=$?
eval "exec ${SVC[1]}>&-"
wait "$svc_pid" 2>/dev/null
exit $rc
