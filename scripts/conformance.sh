#!/usr/bin/env bash
# Run the conformance tests (tests/conformance, pytest) in the stack's venv
# against the scheduler under test. Needs `scripts/stack.sh up` and a seeded
# cloud (`scripts/stack.sh seed ...`). Extra arguments go to pytest.
#   scripts/conformance.sh                           # target/release/nova-scheduler-rs
#   NSRS_SCHEDULER_CMD=nova scripts/conformance.sh   # the real nova-scheduler 34
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
nsrs_ensure_venv
export NSRS_STATE
cd "$NSRS_REPO"
exec "$NSRS_VENV/bin/python" -m pytest tests/conformance -v "$@"
