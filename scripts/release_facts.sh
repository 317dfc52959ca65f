#!/usr/bin/env bash
# Per-release facts of nova, read from each release's own source: for each series,
# that series' newest nova release is downloaded from PyPI (pip download --no-deps,
# a wheel or an sdist) into a throwaway directory and unpacked, and
# scripts/release_facts.py reads it with Python's ast module (nothing of nova is
# imported, so no dependency is installed). The result is
# data/nova-releases/<series>.json: service version, host filters and weighers the
# loaders find, request filters, ResourceRequest translations, option defaults of
# [scheduler], [filter_scheduler] and [metrics], object versions, and a few shapes of
# filter code. A pattern not found in a release's source fails the run.
# Output is deterministic: a rerun writes byte-identical files. Do not edit the
# JSON by hand; change the extraction and rerun.
#   scripts/release_facts.sh [SERIES...]    (default: all of them)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The newest point release of each series (PyPI, `pip index versions nova`).
declare -A NOVA_OF=(
    [2024.1]=29.4.0
    [2024.2]=30.3.0
    [2025.1]=31.3.1
    [2025.2]=32.2.1
    [2026.1]=33.0.2
    [2026.2]=34.0.0
)
ALL_SERIES=(2024.1 2024.2 2025.1 2025.2 2026.1 2026.2)
OUT=$NSRS_REPO/data/nova-releases

series=("$@")
[ ${#series[@]} -gt 0 ] || series=("${ALL_SERIES[@]}")
for s in "${series[@]}"; do
    [ -n "${NOVA_OF[$s]:-}" ] || nsrs_die "unknown series '$s' (known: ${ALL_SERIES[*]}); usage: $0 [SERIES...]"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$OUT"

for s in "${series[@]}"; do
    version=${NOVA_OF[$s]}
    dl=$tmp/$s/download src=$tmp/$s/src
    mkdir -p "$dl" "$src"
    nsrs_log "nova $version ($s): downloading from PyPI"
    "$NSRS_PYTHON" -m pip download -q --disable-pip-version-check --no-deps \
        --no-binary :none: -d "$dl" "nova==$version" ||
        nsrs_die "pip download nova==$version failed"
    files=("$dl"/*)
    [ ${#files[@]} -eq 1 ] || nsrs_die "pip download nova==$version left ${#files[@]} files"
    file=${files[0]}
    case $file in
    */nova-"$version"-*.whl)
        "$NSRS_PYTHON" -m zipfile -e "$file" "$src" || nsrs_die "cannot unpack $file"
        root=$src
        grep -qx "Version: $version" "$src/nova-$version.dist-info/METADATA" ||
            nsrs_die "$(basename "$file") does not say Version: $version"
        ;;
    */nova-"$version".tar.gz)
        tar -xzf "$file" -C "$src" || nsrs_die "cannot unpack $file"
        root=$src/nova-$version
        grep -qx "Version: $version" "$root/PKG-INFO" ||
            nsrs_die "$(basename "$file") does not say Version: $version"
        ;;
    *) nsrs_die "pip download nova==$version gave an unexpected file $(basename "$file")" ;;
    esac
    "$NSRS_PYTHON" "$NSRS_REPO/scripts/release_facts.py" "$root" "$s" "$version" "$OUT/$s.json" ||
        nsrs_die "nova $version ($s): facts could not be read (see above)"
    nsrs_log "nova $version ($s): wrote data/nova-releases/$s.json"
    rm -rf "${tmp:?}/$s"
done
