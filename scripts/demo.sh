#!/usr/bin/env bash
# The newcomer's "run the main job": a fresh local stack, a seeded cloud of 20
# compute hosts in 2 cells, the scheduler built and started, a few demo
# select_destinations calls through nova's own client, then the scheduler keeps
# running in the foreground (its log is followed). Ctrl-C stops it and the stack.
#
#   scripts/demo.sh                          # nova-scheduler-rs (cargo build --release)
#   NSRS_SCHEDULER_CMD=nova scripts/demo.sh  # the real nova-scheduler 34, for comparison
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$NSRS_REPO"

DAEMON_PID=$NSRS_STATE/daemon.pid
DAEMON_LOG=$NSRS_STATE/logs/daemon.log

cleanup() {
    trap - EXIT INT TERM
    echo
    scripts/stack.sh down || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

scripts/stack.sh up
scripts/stack.sh seed --hosts 20 --cells 2 --big-hosts 2 --disabled-hosts 2 --down-hosts 1 --seed 1
nsrs_ensure_venv
VENV=$NSRS_VENV

if [ "${NSRS_SCHEDULER_CMD:-}" = nova ]; then
    cmd=("$VENV/bin/nova-scheduler" --config-file "$NSRS_STATE/nova.conf")
    ready='Starting scheduler node'
else
    nsrs_log "cargo build --release"
    cargo build --release
    bin=${NSRS_BIN:-$(cargo metadata --format-version 1 --no-deps 2>/dev/null |
        "$VENV/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/nova-scheduler-rs}
    cmd=("$bin" --config-file "$NSRS_STATE/nova.conf")
    ready='scheduler ready'
fi

nsrs_log "starting: ${cmd[*]} (log: $DAEMON_LOG)"
: >"$DAEMON_LOG"
RUST_LOG=${RUST_LOG:-info} setsid "${cmd[@]}" </dev/null >>"$DAEMON_LOG" 2>&1 &
echo $! >"$DAEMON_PID"
for ((i = 0; i < 120; i++)); do
    grep -qE "$ready" "$DAEMON_LOG" && break
    nsrs_pid_alive "$DAEMON_PID" || { tail -n 40 "$DAEMON_LOG"; nsrs_die "the scheduler exited"; }
    sleep 0.5
done
grep -qE "$ready" "$DAEMON_LOG" || { tail -n 40 "$DAEMON_LOG"; nsrs_die "no '$ready' in $DAEMON_LOG within 60s"; }
nsrs_log "demo requests through nova's SchedulerAPI:"
"$VENV/bin/python" scripts/demo_requests.py --config-file "$NSRS_STATE/nova.conf"

nsrs_log "the scheduler keeps running (pid $(cat "$DAEMON_PID")); following its log, Ctrl-C stops everything"
tail -n 5 -f --pid="$(cat "$DAEMON_PID")" "$DAEMON_LOG"
