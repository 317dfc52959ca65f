#!/usr/bin/env bash
# nova-scheduler 34 and nova-scheduler-rs side by side on the same seeded cloud
# (bench/side_by_side.py; see its --help). For each host count it recreates the
# test stack (scripts/stack.sh up: this DROPS the nsrs_* databases), seeds it,
# runs the load against nova-scheduler from the venv, then against our release
# binary (in two rounds by default, the order reversed in the second, pooled),
# and prints a markdown table with the ratios. The stack is left up.
#
#   scripts/bench_side_by_side.sh --hosts 100,1000
#   scripts/bench_side_by_side.sh --hosts 5000 --single 20 --multi 3
#   scripts/bench_side_by_side.sh --hosts 1000 --schedulers ours --reuse-stack
#
# The binary: $NSRS_BIN, else ${CARGO_TARGET_DIR:-<repo>/target}/release/nova-scheduler-rs
# (build it first: cargo build --release --bin nova-scheduler-rs).
# Results: <state>/bench/results-*.json and report-*.md.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
nsrs_ensure_services
nsrs_ensure_venv
bin=${NSRS_BIN:-${CARGO_TARGET_DIR:-$NSRS_REPO/target}/release/nova-scheduler-rs}
export NSRS_STATE
exec "$NSRS_VENV/bin/python" "$NSRS_REPO/bench/side_by_side.py" --bin "$bin" \
    --command-line "scripts/bench_side_by_side.sh $*" "$@"
