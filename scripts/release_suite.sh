#!/usr/bin/env bash
# nova-scheduler-rs on a cloud of an older nova release, proven with that release's own
# code: its venv (requirements/nova-<release>.txt: nova, Placement, their libraries at
# the release's upper-constraints) builds the schemas with its own nova-manage and
# placement-manage and serves its own Placement; the tests call through its own
# SchedulerAPI client and objects, and boot and move servers through its own nova-api,
# nova-conductor and nova-computes.
#
#   scripts/release_suite.sh RELEASE...   e.g. 2024.1 2025.1 2026.1
#
# Per release, in a state dir of its own ($NSRS_STATE/release-<release>):
#   1. scripts/stack.sh up + seed (20 hosts, 2 cells; as .ci/run seeds nova 34's stack);
#   2. the conformance tests against that release's own nova-scheduler (checks the stack
#      and the tests on that release), then against nova-scheduler-rs, which must ask
#      Placement what that release's nova-scheduler asked;
#   3. the stack stops; with NSRS_RELEASE_CONTROL_PLANE=1 (default) the control-plane
#      tests (scripts/control_plane.sh test) run with that release's services around
#      nova-scheduler-rs.
# nova-scheduler-rs is left at nova_release = auto: it must say it schedules as that
# release (each suite has a test for it); a release whose service version an older one
# shares (2024.2's 67 is 2024.1's), which auto reads as the older, is named in nova.conf
# (NSRS_SCHEDULE_AS), as its operators must name it.
#
# Knobs: NSRS_BIN (the daemon [$CARGO_TARGET_DIR or target]/release/nova-scheduler-rs),
# NSRS_RELEASE_CONTROL_PLANE [1], NSRS_RELEASE_REFERENCE [1] (0: no reference run);
# NSRS_DB_PREFIX, NSRS_VHOST, NSRS_PLACEMENT_PORT, NSRS_CP_* as for stack.sh and
# control_plane.sh (a run beside another stack).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ $# -gt 0 ] || { sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }
BIN=${NSRS_BIN:-${CARGO_TARGET_DIR:-$NSRS_REPO/target}/release/nova-scheduler-rs}
[ -x "$BIN" ] || nsrs_die "$BIN not found: cargo build --release (or set NSRS_BIN)"
BASE_STATE=$NSRS_STATE
CURRENT=

on_exit() {
    local rc=$?
    if [ -n "$CURRENT" ]; then
        NSRS_RELEASE=$CURRENT NSRS_STATE=$BASE_STATE/release-$CURRENT "$NSRS_REPO/scripts/stack.sh" stop >/dev/null 2>&1 || true
        [ "$rc" -ne 0 ] && nsrs_log "nova $CURRENT: failed (logs in $BASE_STATE/release-$CURRENT/logs)"
    fi
    exit "$rc"
}
trap on_exit EXIT

# Whether an older release has RELEASE's service version (data/nova-releases).
shares_version_with_older() { # shares_version_with_older RELEASE
    "$NSRS_PYTHON" - "$NSRS_REPO/data/nova-releases" "$1" <<'PY'
import json, pathlib, sys
facts = {p.stem: json.loads(p.read_text()) for p in pathlib.Path(sys.argv[1]).glob("*.json")}
mine = facts[sys.argv[2]]["service_version"]
sys.exit(0 if any(s < sys.argv[2] and f["service_version"] == mine for s, f in facts.items()) else 1)
PY
}

for release in "$@"; do
    t0=$SECONDS
    CURRENT=$release
    export NSRS_RELEASE=$release NSRS_STATE=$BASE_STATE/release-$release
    NSRS_SCHEDULE_AS=
    shares_version_with_older "$release" && NSRS_SCHEDULE_AS=$release
    export NSRS_SCHEDULE_AS
    nsrs_log "nova $release: stack (its nova-manage, placement-manage and Placement) and seed"
    "$NSRS_REPO/scripts/stack.sh" up
    "$NSRS_REPO/scripts/stack.sh" seed --hosts 20 --cells 2 --big-hosts 2 --disabled-hosts 2 \
        --down-hosts 1 --seed 1 >"$NSRS_STATE/logs/seed.log"
    if [ "${NSRS_RELEASE_REFERENCE:-1}" = 1 ]; then
        nsrs_log "nova $release: conformance tests against its own nova-scheduler"
        NSRS_SCHEDULER_CMD=nova NSRS_BIN=$BIN "$NSRS_REPO/scripts/conformance.sh" -q
        cp "$NSRS_STATE/logs/scheduler-under-test.log" "$NSRS_STATE/logs/nova-scheduler-reference.log"
        reference=required
    else
        reference=
    fi
    nsrs_log "nova $release: conformance tests against nova-scheduler-rs"
    NSRS_SCHEDULER_CMD='' NSRS_BIN=$BIN NSRS_PLACEMENT_REFERENCE=$reference "$NSRS_REPO/scripts/conformance.sh" -q
    "$NSRS_REPO/scripts/stack.sh" stop
    if [ "${NSRS_RELEASE_CONTROL_PLANE:-1}" = 1 ]; then
        nsrs_log "nova $release: control plane (its nova-api, nova-conductor, nova-computes) through nova-scheduler-rs"
        NSRS_SCHEDULER_CMD='' NSRS_BIN=$BIN "$NSRS_REPO/scripts/control_plane.sh" test -q
    fi
    CURRENT=
    nsrs_log "nova $release: passed ($((SECONDS - t0))s)"
done
