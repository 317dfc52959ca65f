#!/usr/bin/env bash
# Build the fuzz targets in fuzz/ and run each for a bounded time.
#
#   scripts/fuzz.sh [--seconds N] [--build-only] [target...]   (default: 60 s, every target)
#
# How: stable cargo builds fuzz/ (a cargo-fuzz project) with the flags that
# `cargo fuzz build --sanitizer none --debug-assertions` passes, libFuzzer coming from
# the libfuzzer-sys crate. Why not cargo-fuzz itself: CI has no cargo-fuzz and only
# stable Rust, and cargo-fuzz's default sanitizer (AddressSanitizer) needs nightly.
# The code under test is safe Rust (#![forbid(unsafe_code)]): its bugs show as panics
# (including overflow checks and debug assertions, both on here), which libFuzzer
# reports without a sanitizer; ASan would add little for the build time it costs.
# Each flag is a stable rustc option:
#   --cfg fuzzing                               what cargo-fuzz sets for `cfg(fuzzing)` code
#   -Cpasses=sancov-module                      SanitizerCoverage, with the options below
#   -Cllvm-args=-sanitizer-coverage-level=4     edges
#   -Cllvm-args=-sanitizer-coverage-inline-8bit-counters  libFuzzer's counters
#   -Cllvm-args=-sanitizer-coverage-pc-table    ... and their PCs (coverage figures)
#   -Cllvm-args=-sanitizer-coverage-trace-compares  comparison operands (guides mutations)
#   -Cdebug-assertions (overflow checks follow)  release optimisation otherwise
# --target <host triple> keeps the flags off build scripts and proc macros, as
# cargo-fuzz does. Left out from cargo-fuzz's set: -Clink-dead-code and one codegen
# unit per crate (a longer build from scratch), -sanitizer-coverage-stack-depth and
# -simplifycfg-branch-fold-threshold=0 (refinements); fuzz/Cargo.toml also builds the
# crates the targets never run (TLS, SQL, HTTP, the runtime) at opt-level 0. With
# cargo-fuzz installed the same targets run as usual:
# `cd fuzz && cargo fuzz run -s none envelope`.
#
# Where things go:
#   build        $NSRS_CACHE/fuzz-target-<hash of fuzz/Cargo.lock and the flags> (newest two kept)
#   corpus       $NSRS_STATE/fuzz/corpus/<target>: the working corpus, kept between runs;
#                fuzz/corpus/<target> (the committed seeds) is read, never written
#   crashes      $NSRS_STATE/fuzz/artifacts/<target>/: the script then exits 1 and
#                prints how to reproduce (the target binary with the file as argument)
#   logs         $NSRS_STATE/fuzz/logs/<target>.log
# Knobs (environment): NSRS_FUZZ_MAX_LEN (bytes per input, 262144), NSRS_FUZZ_RSS_MB
# (1024), NSRS_FUZZ_TIMEOUT (seconds per input, 10).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

usage() { sed -n '2,4p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

SECONDS_PER_TARGET=60
BUILD_ONLY=0
TARGETS=()
while [ $# -gt 0 ]; do
    case $1 in
    --seconds)
        [ $# -ge 2 ] || nsrs_die "--seconds needs a value"
        SECONDS_PER_TARGET=$2
        shift 2
        ;;
    --seconds=*)
        SECONDS_PER_TARGET=${1#--seconds=}
        shift
        ;;
    --build-only)
        BUILD_ONLY=1
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    -*) nsrs_die "unknown option $1 (see --help)" ;;
    *)
        TARGETS+=("$1")
        shift
        ;;
    esac
done
[[ $SECONDS_PER_TARGET =~ ^[1-9][0-9]*$ ]] || nsrs_die "--seconds: '$SECONDS_PER_TARGET' is not a positive number"

if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck source=/dev/null
    source "$HOME/.cargo/env"
fi
command -v cargo >/dev/null 2>&1 || nsrs_die "no Rust toolchain (cargo) on PATH"

ALL_TARGETS=()
for f in fuzz/fuzz_targets/*.rs; do
    ALL_TARGETS+=("$(basename "$f" .rs)")
done
if [ ${#TARGETS[@]} -eq 0 ]; then
    TARGETS=("${ALL_TARGETS[@]}")
fi
for t in "${TARGETS[@]}"; do
    [[ " ${ALL_TARGETS[*]} " == *" $t "* ]] || nsrs_die "unknown fuzz target '$t' (have: ${ALL_TARGETS[*]})"
done

MAX_LEN=${NSRS_FUZZ_MAX_LEN:-262144}
RSS_MB=${NSRS_FUZZ_RSS_MB:-1024}
UNIT_TIMEOUT=${NSRS_FUZZ_TIMEOUT:-10}

FLAGS=(
    --cfg fuzzing
    -Cpasses=sancov-module
    -Cllvm-args=-sanitizer-coverage-level=4
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters
    -Cllvm-args=-sanitizer-coverage-pc-table
    -Cllvm-args=-sanitizer-coverage-trace-compares
    -Cdebug-assertions
)
TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
[ -n "$TRIPLE" ] || nsrs_die "cannot read the host triple from 'rustc -vV'"
KEY=$({ cat fuzz/Cargo.lock; echo "${FLAGS[*]} $TRIPLE"; } | sha256sum | cut -c1-16)
TARGET_DIR=$NSRS_CACHE/fuzz-target-$KEY
mkdir -p "$TARGET_DIR"
touch "$TARGET_DIR"
# shellcheck disable=SC2012
ls -1dt "$NSRS_CACHE"/fuzz-target-* 2>/dev/null | tail -n +3 | xargs -r rm -rf

nsrs_log "building fuzz targets (${TARGETS[*]}) in $TARGET_DIR"
BUILD_ARGS=()
for t in "${TARGETS[@]}"; do
    BUILD_ARGS+=(--bin "$t")
done
t0=$SECONDS
env -u CARGO_ENCODED_RUSTFLAGS -u CARGO_BUILD_RUSTFLAGS RUSTFLAGS="${FLAGS[*]}" \
    cargo build --manifest-path fuzz/Cargo.toml --locked --release \
    --target "$TRIPLE" --target-dir "$TARGET_DIR" "${BUILD_ARGS[@]}" ||
    nsrs_die "building the fuzz targets failed"
nsrs_log "fuzz targets built in $((SECONDS - t0))s"
[ "$BUILD_ONLY" -eq 0 ] || exit 0

OUT=$NSRS_STATE/fuzz
mkdir -p "$OUT/logs"
FAILED=()
SUMMARY=()
stat_of() { sed -n "s/^stat::$1: *//p" "$2" | tail -n 1; }
for t in "${TARGETS[@]}"; do
    bin=$TARGET_DIR/$TRIPLE/release/$t
    corpus=$OUT/corpus/$t
    artifacts=$OUT/artifacts/$t/
    log=$OUT/logs/$t.log
    mkdir -p "$corpus" "$artifacts"
    seeds=()
    [ -d "fuzz/corpus/$t" ] && seeds=("fuzz/corpus/$t")
    dict=()
    [ -f "fuzz/dict/$t.dict" ] && dict=("-dict=fuzz/dict/$t.dict")
    nsrs_log "fuzzing $t for ${SECONDS_PER_TARGET}s (log: $log)"
    rc=0
    "$bin" "${dict[@]}" \
        -max_total_time="$SECONDS_PER_TARGET" -max_len="$MAX_LEN" -rss_limit_mb="$RSS_MB" \
        -timeout="$UNIT_TIMEOUT" -artifact_prefix="$artifacts" -print_final_stats=1 \
        "$corpus" "${seeds[@]}" >"$log" 2>&1 || rc=$?
    last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
    line=$(printf '%-14s %6s execs %8s/s  cov %5s  ft %6s  corpus %5s  rss %5s MB' "$t" \
        "$(stat_of number_of_executed_units "$log")" "$(stat_of average_exec_per_sec "$log")" \
        "${cov:-?}" "${ft:-?}" "${corp:-?}" "$(stat_of peak_rss_mb "$log")")
    if [ "$rc" -eq 0 ]; then
        SUMMARY+=("$line  ok")
        continue
    fi
    SUMMARY+=("$line  FAILED (exit $rc)")
    FAILED+=("$t")
    printf '\n--- %s: libFuzzer exited %d (log: %s)\n' "$t" "$rc" "$log" >&2
    grep -m 1 -A 1 'panicked at' "$log" >&2 || true
    # The daemon's frames of the backtrace.
    grep -A 1 -E '^ *[0-9]+: nova_scheduler::' "$log" | grep -v '^--$' | head -n 16 >&2 || true
    grep -v -e '^#[0-9]' -e '^ *[0-9]*: ' -e '^ *at ' "$log" | tail -n 12 >&2
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    if [ -n "$artifact" ]; then
        printf '\n--- %s: reproducer %s\n    reproduce: %s %s\n' "$t" "$artifact" "$bin" "$artifact" >&2
    fi
done

printf '\n=== fuzzing, %ss per target\n' "$SECONDS_PER_TARGET"
printf '%s\n' "${SUMMARY[@]}"
if [ ${#FAILED[@]} -gt 0 ]; then
    nsrs_die "fuzz target(s) failed: ${FAILED[*]} (reproducers under $OUT/artifacts)"
fi
