#!/usr/bin/env bash
# Check the files an operator installs beside the binary, without installing anything:
#   - packaging/nova-scheduler-rs.service: `systemd-analyze verify` on a copy whose
#     ExecStart names BINARY (the unit's /usr/bin path exists only once the package is
#     installed; scripts/package.sh --install-check verifies the installed unit); any
#     warning fails
#   - packaging/prometheus/alerts.yml: `promtool check rules` and `promtool test rules`
#     on packaging/prometheus/alerts_test.yml
#   - packaging/grafana/*.json: valid JSON, and every query valid PromQL (`promtool check
#     rules` on a rule per query, Grafana's variables replaced)
#
#   scripts/check_packaging.sh [BINARY]    (default: $CARGO_TARGET_DIR/release/nova-scheduler-rs)
#
# promtool is taken from PATH, else from Debian's prometheus package, unpacked once into
# $NSRS_CACHE (installing the package would start a Prometheus server). A tool that is
# missing and cannot be had skips its check with the reason.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

BINARY=${1:-${CARGO_TARGET_DIR:-target}/release/nova-scheduler-rs}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# --- the systemd unit --------------------------------------------------------
if command -v systemd-analyze >/dev/null; then
    [ -x "$BINARY" ] || nsrs_die "no $BINARY: build it first (cargo build --release)"
    # The same file name: systemd reads the unit's name from it.
    unit=$WORK/nova-scheduler-rs.service
    sed "s#^ExecStart=/usr/bin/nova-scheduler-rs #ExecStart=$(realpath "$BINARY") #" \
        packaging/nova-scheduler-rs.service >"$unit"
    grep -q "^ExecStart=$(realpath "$BINARY") " "$unit" || nsrs_die "the unit's ExecStart is not /usr/bin/nova-scheduler-rs ..."
    # The man page of Documentation= is installed only with the package.
    if ! out=$(systemd-analyze verify --man=no "$unit" 2>&1) || [ -n "$out" ]; then
        printf '%s\n' "$out"
        nsrs_die "systemd-analyze verify: packaging/nova-scheduler-rs.service"
    fi
    nsrs_log "systemd-analyze verify: packaging/nova-scheduler-rs.service OK"
else
    nsrs_log "systemd-analyze not installed (no systemd package): unit check skipped"
fi

# --- the Prometheus rules ----------------------------------------------------
# Prints promtool's path; on failure, the reason on stderr.
find_promtool() {
    local cached=$NSRS_CACHE/promtool/promtool deb
    if command -v promtool >/dev/null; then
        command -v promtool
        return 0
    fi
    if [ -x "$cached" ]; then
        echo "$cached"
        return 0
    fi
    command -v apt-get >/dev/null || {
        echo "no apt-get to fetch Debian's prometheus package" >&2
        return 1
    }
    # A download only: apt's lists are refreshed when the package is not known yet.
    if ! (cd "$WORK" && apt-get download -q prometheus >/dev/null 2>&1); then
        nsrs_as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null 2>&1 || true
        (cd "$WORK" && apt-get download -q prometheus >/dev/null 2>&1) || {
            echo "apt-get download prometheus failed (no such package in this machine's sources?)" >&2
            return 1
        }
    fi
    deb=$(ls "$WORK"/prometheus_*.deb)
    dpkg-deb -x "$deb" "$WORK/prometheus"
    [ -x "$WORK/prometheus/usr/bin/promtool" ] || {
        echo "$deb has no usr/bin/promtool" >&2
        return 1
    }
    install -D -m 0755 "$WORK/prometheus/usr/bin/promtool" "$cached"
    nsrs_log "promtool from $(basename "$deb") unpacked into $cached"
    echo "$cached"
}

promtool=
if promtool=$(find_promtool); then
    "$promtool" --version 2>&1 | head -n 1
    "$promtool" check rules packaging/prometheus/alerts.yml
    (cd packaging/prometheus && "$promtool" test rules alerts_test.yml)
else
    promtool=
    nsrs_log "promtool not available: alerting rules and dashboard queries not checked"
fi

# --- the Grafana dashboard ---------------------------------------------------
# Each query as a recording rule (JSON strings are valid YAML scalars).
dashboard_rules() {
    "$NSRS_PYTHON" - "$1" <<'PY'
import json, sys

queries = []
def walk(v):
    if isinstance(v, dict):
        for k, x in v.items():
            if k == "expr" and isinstance(x, str):
                queries.append(x)
            else:
                walk(x)
    elif isinstance(v, list):
        for x in v:
            walk(x)
walk(json.load(open(sys.argv[1]))["panels"])
print("groups:\n  - name: dashboard\n    rules:")
for i, q in enumerate(queries):
    for var, value in (("$__rate_interval", "5m"), ("$job", ".*"), ("$instance", ".*")):
        q = q.replace(var, value)
    print(f"      - record: dashboard:query{i}\n        expr: {json.dumps(q)}")
PY
}
for dashboard in packaging/grafana/*.json; do
    "$NSRS_PYTHON" -m json.tool "$dashboard" >/dev/null || nsrs_die "$dashboard is not valid JSON"
    if [ -n "$promtool" ]; then
        dashboard_rules "$dashboard" >"$WORK/dashboard-rules.yml"
        "$promtool" check rules "$WORK/dashboard-rules.yml" ||
            nsrs_die "$dashboard: a query is not valid PromQL"
    fi
    nsrs_log "$dashboard: valid JSON$([ -n "$promtool" ] && echo ", every query valid PromQL")"
done
