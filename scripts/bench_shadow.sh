#!/usr/bin/env bash
# The shadow beside the real nova-scheduler 34 under load (bench/shadow.py; see its
# --help): nova's p50 without and with two shadows, what each shadow saw, its decision
# lag and agreement, and the changed shadow's differences by first step. Runs on the
# stack as it is: bring it up and seed it first.
#
#   scripts/stack.sh up && scripts/stack.sh seed --hosts 1000 --cells 2
#   scripts/bench_shadow.sh --calls 1000
#
# The binary: $NSRS_BIN, else ${CARGO_TARGET_DIR:-<repo>/target}/release/nova-scheduler-rs.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
nsrs_ensure_services
nsrs_ensure_venv
bin=${NSRS_BIN:-${CARGO_TARGET_DIR:-$NSRS_REPO/target}/release/nova-scheduler-rs}
mkdir -p "$NSRS_STATE/bench"
exec "$NSRS_VENV/bin/python" "$NSRS_REPO/bench/shadow.py" --state-dir "$NSRS_STATE" --bin "$bin" \
    --json "$NSRS_STATE/bench/shadow-$(date -u +%Y%m%dT%H%M%SZ).json" "$@"
