#!/usr/bin/env bash
# Build the Debian package of nova-scheduler-rs from the release binary, check it, and
# (with --install-check) install it, try it and purge it again.
#
#   scripts/package.sh [--install-check]
#
# Needs `cargo build --release --all-targets` done first (the binary and the man-page
# renderer, examples/manpage.rs): the package is made from target/release without
# another build (`cargo deb --no-build --strip`: the release profile keeps line
# tables, the package's binary is stripped). To build the package from scratch
# instead: `cargo deb --profile dist` (a second full compile; the man page must then
# be rendered into target/dist/ as below).
#
# cargo-deb (pinned) is installed once into $NSRS_CACHE/cargo-deb. The .deb goes to
# $CARGO_TARGET_DIR/debian/. Checks: the files the package must hold; lintian when
# installed (its findings are printed; errors fail); with --install-check, as root on
# Debian: dpkg -i, `nova-scheduler-rs --version`, `config check` on a small nova.conf,
# `systemd-analyze verify` of the installed unit, then dpkg --purge (and the nova user
# and group when the package created them), leaving the machine as it was.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

CARGO_DEB_VERSION=3.8.0
INSTALL_CHECK=0
case "${1:-}" in
    --install-check) INSTALL_CHECK=1 ;;
    "") ;;
    *) nsrs_die "usage: scripts/package.sh [--install-check]" ;;
esac

: "${CARGO_TARGET_DIR:?set CARGO_TARGET_DIR to the target dir of the release build}"
RELEASE=$CARGO_TARGET_DIR/release
[ -x "$RELEASE/nova-scheduler-rs" ] || nsrs_die "no $RELEASE/nova-scheduler-rs: run cargo build --release --all-targets"
[ -x "$RELEASE/examples/manpage" ] || nsrs_die "no $RELEASE/examples/manpage: run cargo build --release --all-targets"

CARGO_DEB_ROOT=$NSRS_CACHE/cargo-deb-$CARGO_DEB_VERSION
if [ ! -x "$CARGO_DEB_ROOT/bin/cargo-deb" ]; then
    nsrs_log "installing cargo-deb $CARGO_DEB_VERSION into $CARGO_DEB_ROOT (once)"
    # Its own build dir, not the project's target dir.
    env -u CARGO_TARGET_DIR cargo install --locked --quiet --version "$CARGO_DEB_VERSION" \
        --root "$CARGO_DEB_ROOT" cargo-deb
fi
export PATH=$CARGO_DEB_ROOT/bin:$PATH

# The man page, rendered from the command line of this build.
"$RELEASE/examples/manpage" | gzip -9n >"$RELEASE/nova-scheduler-rs.1.gz"

OUT=$CARGO_TARGET_DIR/debian
rm -rf "$OUT"
mkdir -p "$OUT"
DEB=$(cargo deb --no-build --strip --output "$OUT" | tail -n 1)
[ -f "$DEB" ] || nsrs_die "cargo deb made no package (got: $DEB)"
nsrs_log "package: $DEB ($(du -h "$DEB" | cut -f1))"

CONTENTS=$(dpkg-deb -c "$DEB")
for path in ./usr/bin/nova-scheduler-rs \
    ./usr/lib/systemd/system/nova-scheduler-rs.service \
    ./usr/share/doc/nova-scheduler-rs/nova.conf.sample \
    ./usr/share/doc/nova-scheduler-rs/copyright \
    ./usr/share/doc/nova-scheduler-rs/examples/prometheus/alerts.yml \
    ./usr/share/doc/nova-scheduler-rs/examples/grafana/nova-scheduler-rs.json \
    ./usr/share/man/man1/nova-scheduler-rs.1.gz; do
    grep -q " $path\$" <<<"$CONTENTS" || {
        printf '%s\n' "$CONTENTS"
        nsrs_die "the package lacks $path"
    }
done
dpkg-deb -I "$DEB" | sed -n '/Package:/,$p'
# Stripped: no DWARF left in the packaged binary (.debug_gdb_scripts is not DWARF).
UNPACKED=$(mktemp -d)
trap 'rm -rf "$UNPACKED"' EXIT
dpkg-deb -x "$DEB" "$UNPACKED"
if readelf -S "$UNPACKED/usr/bin/nova-scheduler-rs" | grep -q -e '\.debug_info' -e '\.debug_line'; then
    nsrs_die "the packaged binary still has debug sections"
fi
nsrs_log "binary $(du -h "$RELEASE/nova-scheduler-rs" | cut -f1) in target/release, $(du -h "$UNPACKED/usr/bin/nova-scheduler-rs" | cut -f1) packaged"

if command -v lintian >/dev/null; then
    # Errors fail; warnings and infos are printed (no changelog, no dbgsym, ...).
    lintian --tag-display-limit 0 --fail-on error "$DEB" || nsrs_die "lintian found errors"
else
    nsrs_log "lintian not installed: skipped"
fi

[ "$INSTALL_CHECK" = 1 ] || exit 0
[ "$(id -u)" -eq 0 ] || nsrs_die "--install-check installs the package: run as root"
if dpkg-query -W -f='${Status}' nova-scheduler-rs 2>/dev/null | grep -q 'install ok installed'; then
    nsrs_die "nova-scheduler-rs is already installed on this machine; not touching it"
fi
# The machine is left as it was: a nova user and group the package created go too.
had_user=0 had_group=0
getent passwd nova >/dev/null && had_user=1
getent group nova >/dev/null && had_group=1
purge() {
    if dpkg-query -W -f='${Status}' nova-scheduler-rs 2>/dev/null | grep -q installed; then
        dpkg --purge nova-scheduler-rs >/dev/null
    fi
    if [ "$had_user" = 0 ] && getent passwd nova >/dev/null; then
        deluser --system --quiet nova >/dev/null 2>&1 || true
    fi
    if [ "$had_group" = 0 ] && getent group nova >/dev/null; then
        delgroup --system --quiet nova >/dev/null 2>&1 || true
    fi
}
trap 'purge; rm -rf "$UNPACKED"' EXIT
dpkg -i "$DEB"
/usr/bin/nova-scheduler-rs --version
enabled=$(systemctl is-enabled nova-scheduler-rs.service 2>/dev/null || true)
[ "$enabled" != enabled ] || nsrs_die "the package enabled the unit"
cat >"$UNPACKED/nova.conf" <<'CONF'
[DEFAULT]
transport_url = rabbit://nova:secret@127.0.0.1:5672/
[database]
connection = mysql+pymysql://nova:secret@127.0.0.1/nova_cell0?charset=utf8
[api_database]
connection = mysql+pymysql://nova:secret@127.0.0.1/nova_api?charset=utf8
[placement]
auth_type = none
endpoint_override = http://127.0.0.1:8778
CONF
/usr/bin/nova-scheduler-rs config check --config-file "$UNPACKED/nova.conf"
if command -v systemd-analyze >/dev/null; then
    # Documentation='s man page is checked where man is installed.
    man=yes
    command -v man >/dev/null || man=no
    # verify exits 0 on warnings (an unknown key, a bad value): any output fails.
    if ! out=$(systemd-analyze verify --man="$man" /usr/lib/systemd/system/nova-scheduler-rs.service 2>&1) ||
        [ -n "$out" ]; then
        printf '%s\n' "$out"
        nsrs_die "systemd-analyze verify: the installed unit"
    fi
    nsrs_log "systemd-analyze verify: unit OK (man page checked: $man)"
fi
getent passwd nova >/dev/null || nsrs_die "postinst did not create the nova user"
purge
if dpkg-query -W nova-scheduler-rs >/dev/null 2>&1 &&
    dpkg-query -W -f='${Status}' nova-scheduler-rs | grep -qv 'not-installed'; then
    nsrs_die "dpkg --purge left the package behind"
fi
[ ! -e /usr/bin/nova-scheduler-rs ] || nsrs_die "dpkg --purge left /usr/bin/nova-scheduler-rs"
nsrs_log "installed, checked and purged"
