# shellcheck shell=bash
# Shared helpers for the test stack scripts (stack.sh, demo.sh, .ci/run).
# Source it; it defines variables and functions and changes nothing by itself.
#
# Knobs (environment):
#   NSRS_CACHE   cache dir outside the clone (venvs, cargo target)  [~/.cache/nova-scheduler-rs]
#   NSRS_STATE   generated config, logs, pidfiles                    [<repo>/.stack]
#   NSRS_PYTHON  interpreter used to create the venv (3.11)          [python3]
#   NSRS_VENV    use this ready venv instead of the cached one (e.g. in a container image;
#                it must hold requirements/python.txt and the marker file .nsrs-complete);
#                ignored with NSRS_RELEASE
#   NSRS_RELEASE an older nova release (2024.1 to 2026.1: requirements/nova-<release>.txt)
#                whose own nova, Placement and tools the stack runs instead of the pinned
#                nova 34 [unset: requirements/python.txt]
#   NSRS_DB_PREFIX, NSRS_VHOST, NSRS_PLACEMENT_PORT  what the stack's databases and
#                vhosts are called and where Placement listens [nsrs_, nsrs, 8778]: a
#                second stack beside the first
#   NSRS_SERVICES=external  RabbitMQ/MariaDB are managed elsewhere (docker-compose.yml):
#                only wait for them; the broker must already have the vhost 'nsrs'

NSRS_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NSRS_CACHE=${NSRS_CACHE:-${HOME:-/root}/.cache/nova-scheduler-rs}
NSRS_STATE=${NSRS_STATE:-$NSRS_REPO/.stack}
NSRS_PYTHON=${NSRS_PYTHON:-python3}
NSRS_RELEASE=${NSRS_RELEASE:-}
if [ -n "$NSRS_RELEASE" ]; then
    NSRS_REQUIREMENTS=$NSRS_REPO/requirements/nova-$NSRS_RELEASE.txt
else
    NSRS_REQUIREMENTS=$NSRS_REPO/requirements/python.txt
fi

# Everything the stack creates is namespaced so it never collides with other
# databases or a real scheduler on the same broker.
NSRS_DB_PREFIX=${NSRS_DB_PREFIX:-nsrs_}
NSRS_DB_URL_BASE="mysql+pymysql://root:@127.0.0.1"
NSRS_VHOST=${NSRS_VHOST:-nsrs}
# shellcheck disable=SC2034 # used by the scripts that source this file
NSRS_TRANSPORT_URL="rabbit://guest:guest@127.0.0.1:5672/$NSRS_VHOST"
NSRS_PLACEMENT_PORT=${NSRS_PLACEMENT_PORT:-8778}
# shellcheck disable=SC2034
NSRS_PLACEMENT_URL="http://127.0.0.1:$NSRS_PLACEMENT_PORT"
# shellcheck disable=SC2034
NSRS_CELLS=(cell1 cell2)

# Native threads in nova's Python tools and test process (no eventlet patching).
export OS_NOVA_DISABLE_EVENTLET_PATCHING=true
export PYTHONWARNINGS=${PYTHONWARNINGS:-ignore::DeprecationWarning}

nsrs_log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
nsrs_die() { printf '[%s] ERROR: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; exit 1; }

nsrs_db_url() { # nsrs_db_url <short name>  -> SQLAlchemy URL of nsrs_<name>
    printf '%s/%s%s?charset=utf8' "$NSRS_DB_URL_BASE" "$NSRS_DB_PREFIX" "$1"
}

nsrs_cell_transport_url() { # nsrs_cell_transport_url cell1 -> the cell's own vhost
    printf 'rabbit://guest:guest@127.0.0.1:5672/%s_%s' "$NSRS_VHOST" "$1"
}

nsrs_as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

nsrs_port_open() { # nsrs_port_open PORT
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

nsrs_wait_port() { # nsrs_wait_port PORT NAME [SECONDS]
    local port=$1 name=$2 secs=${3:-60} i
    for ((i = 0; i < secs * 2; i++)); do
        nsrs_port_open "$port" && return 0
        sleep 0.5
    done
    nsrs_die "$name did not open 127.0.0.1:$port within ${secs}s"
}

nsrs_pid_alive() { # nsrs_pid_alive PIDFILE
    local pid
    [ -s "$1" ] || return 1
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

nsrs_stop_pidfile() { # nsrs_stop_pidfile PIDFILE NAME: TERM, wait, KILL; removes the pidfile
    local pidfile=$1 name=$2 pid i
    if nsrs_pid_alive "$pidfile"; then
        pid=$(cat "$pidfile")
        nsrs_log "stopping $name (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 40; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.25
        done
        if kill -0 "$pid" 2>/dev/null; then
            nsrs_log "$name did not stop on TERM, killing"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$pidfile"
}

# --- system packages and services -------------------------------------------

nsrs_apt_install() { # nsrs_apt_install PKG...: one apt-get update, then install
    nsrs_log "installing Debian packages: $*"
    nsrs_as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null ||
        nsrs_die "apt-get update failed"
    nsrs_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" ||
        nsrs_die "apt-get install $* failed"
}

nsrs_ensure_packages() {
    local missing=()
    [ -x /usr/sbin/rabbitmq-server ] || command -v rabbitmq-server >/dev/null || missing+=(rabbitmq-server)
    [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
    command -v mariadb >/dev/null || command -v mysql >/dev/null || missing+=(mariadb-client)
    if ! "$NSRS_PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
        missing+=(python3-venv)
    fi
    if [ ${#missing[@]} -gt 0 ]; then
        nsrs_apt_install "${missing[@]}"
        mkdir -p "$NSRS_STATE"
        [[ " ${missing[*]} " == *" mariadb-server "* ]] && touch "$NSRS_STATE/.installed-mariadb"
    fi
    return 0
}

nsrs_mysql() { # root over TCP, as nova connects
    if command -v mariadb >/dev/null; then
        mariadb -h 127.0.0.1 -P 3306 -u root --batch --skip-column-names "$@"
    else
        mysql -h 127.0.0.1 -P 3306 -u root --batch --skip-column-names "$@"
    fi
}

nsrs_ensure_rabbitmq() {
    if ! nsrs_port_open 5672; then
        nsrs_log "starting RabbitMQ"
        nsrs_as_root rabbitmq-server -detached >/dev/null 2>&1 || true
        mkdir -p "$NSRS_STATE" && touch "$NSRS_STATE/.started-rabbitmq"
        nsrs_wait_port 5672 RabbitMQ 60
    fi
    timeout 60 rabbitmqctl -q await_startup >/dev/null 2>&1 ||
        nsrs_die "RabbitMQ answers on 5672 but 'rabbitmqctl await_startup' failed within 60s"
}

nsrs_ensure_mariadb() {
    if ! nsrs_port_open 3306; then
        nsrs_log "starting MariaDB"
        nsrs_as_root install -d -o mysql -g mysql /run/mysqld 2>/dev/null || true
        if [ ! -d /var/lib/mysql/mysql ]; then
            nsrs_as_root mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null ||
                nsrs_die "mariadb-install-db failed"
        fi
        nsrs_as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd ||
            nsrs_die "could not start /usr/sbin/mariadbd"
        mkdir -p "$NSRS_STATE" && touch "$NSRS_STATE/.started-mariadb"
        nsrs_wait_port 3306 MariaDB 60
    fi
    local i
    for ((i = 0; i < 60; i++)); do
        nsrs_mysql -e 'SELECT 1' >/dev/null 2>&1 && return 0
        # A MariaDB this script installed has root on the unix socket only:
        # allow root with an empty password over 127.0.0.1 as nova's URLs need.
        if [ -f "$NSRS_STATE/.installed-mariadb" ] && [ ! -f "$NSRS_STATE/.root-tcp-enabled" ] &&
            nsrs_as_root mariadb -u root -e 'SELECT 1' >/dev/null 2>&1; then
            nsrs_log "enabling root@127.0.0.1 with an empty password on the MariaDB this script installed"
            nsrs_as_root mariadb -u root -e "
                ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket;
                CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
                GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
                FLUSH PRIVILEGES;" && touch "$NSRS_STATE/.root-tcp-enabled"
            continue
        fi
        sleep 1
    done
    nsrs_die "MariaDB: 'root' with an empty password cannot log in over 127.0.0.1:3306 (nova's URLs need it)"
}

nsrs_ensure_services() {
    if [ "${NSRS_SERVICES:-}" = external ]; then
        nsrs_wait_port 5672 RabbitMQ 120
        nsrs_wait_port 3306 MariaDB 120
        local i
        for ((i = 0; i < 60; i++)); do
            nsrs_mysql -e 'SELECT 1' >/dev/null 2>&1 && return 0
            sleep 1
        done
        nsrs_die "MariaDB: root with an empty password cannot log in over 127.0.0.1:3306"
    fi
    nsrs_ensure_packages
    nsrs_ensure_rabbitmq
    nsrs_ensure_mariadb
    nsrs_log "RabbitMQ (5672) and MariaDB (3306) are up"
}

# --- the Python venvs, cached outside the clone -------------------------------
# Each is keyed by its requirements file and Python's version, built once under a
# lock (pip, mostly network), checked complete, and marked with .nsrs-complete.

nsrs_venv_key() { # nsrs_venv_key REQUIREMENTS_FILE
    { cat "$1"; "$NSRS_PYTHON" -c 'import sys; print(sys.version_info[:2])'; } | sha256sum | cut -c1-16
}

nsrs_build_venv() { # nsrs_build_venv VENV REQUIREMENTS_FILE LOCK_NAME
    local venv=$1 req=$2 name=${2#"$NSRS_REPO"/}
    [ -f "$venv/.nsrs-complete" ] && return 0
    mkdir -p "$NSRS_CACHE"
    (
        flock 9
        [ -f "$venv/.nsrs-complete" ] && exit 0
        rm -rf "$venv"
        nsrs_log "building Python venv $venv from $name (a few minutes)"
        "$NSRS_PYTHON" -m venv "$venv" || nsrs_die "python venv creation failed"
        "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$req" ||
            nsrs_die "pip install -r $name failed"
        "$venv/bin/pip" check >/dev/null || {
            "$venv/bin/pip" check >&2
            nsrs_die "pip check: $name is not a complete set"
        }
        date -u +%FT%TZ >"$venv/.nsrs-complete"
        nsrs_log "venv ready: $venv"
    ) 9>"$NSRS_CACHE/.$3.lock" || exit 1
}

# An older release's venv (requirements/nova-<release>.txt): its nova, Placement,
# gunicorn and pytest, as that release's upper-constraints resolve them.
nsrs_release_requirements() { printf '%s/requirements/nova-%s.txt' "$NSRS_REPO" "$1"; }

nsrs_release_venv_path() { # nsrs_release_venv_path RELEASE
    local req
    req=$(nsrs_release_requirements "$1")
    [ -f "$req" ] || nsrs_die "no ${req#"$NSRS_REPO"/} (known releases: $(cd "$NSRS_REPO/requirements" && ls nova-*.txt | sed 's/nova-//; s/\.txt//' | tr '\n' ' '))"
    printf '%s/venv-nova-%s-%s' "$NSRS_CACHE" "$1" "$(nsrs_venv_key "$req")"
}

nsrs_ensure_release_venv() { # nsrs_ensure_release_venv RELEASE: builds once, prints its path
    local venv
    venv=$(nsrs_release_venv_path "$1") || exit 1
    nsrs_build_venv "$venv" "$(nsrs_release_requirements "$1")" "venv-nova-$1"
    echo "$venv"
}

# The stack's venv: requirements/python.txt, or NSRS_RELEASE's.
nsrs_venv_path() {
    if [ -n "$NSRS_RELEASE" ]; then
        nsrs_release_venv_path "$NSRS_RELEASE"
    else
        printf '%s/venv-%s' "$NSRS_CACHE" "$(nsrs_venv_key "$NSRS_REQUIREMENTS")"
    fi
}

# Placement's WSGI application in gunicorn's terms: Placement up to 2024.1 (11.x) has
# no placement.wsgi.api module, only the factory placement.wsgi.init_application().
nsrs_placement_app() { # nsrs_placement_app VENV
    if "$1/bin/python" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("placement.wsgi.api") is None)' 2>/dev/null; then
        echo placement.wsgi.api:application
    else
        echo 'placement.wsgi:init_application()'
    fi
}

# gunicorn from 25 opens a control socket unless told not to; older ones lack the flag.
nsrs_gunicorn_flags() { # nsrs_gunicorn_flags VENV
    "$1/bin/gunicorn" --help 2>/dev/null | grep -q -- --no-control-socket && echo --no-control-socket
    return 0
}

# The environment an older release's nova services run in: as the release ships them,
# eventlet-patched (nova 34's run on native threads, OS_NOVA_DISABLE_EVENTLET_PATCHING).
nsrs_service_env() {
    if [ -n "$NSRS_RELEASE" ]; then
        echo env -u OS_NOVA_DISABLE_EVENTLET_PATCHING
    else
        echo env
    fi
}

# keystone's own venv (requirements/keystone.txt), for the tests that authenticate
# against a real keystone.
nsrs_ensure_keystone_venv() {
    local venv
    venv=$NSRS_CACHE/keystone-venv-$(nsrs_venv_key "$NSRS_REPO/requirements/keystone.txt")
    nsrs_build_venv "$venv" "$NSRS_REPO/requirements/keystone.txt" keystone-venv
    echo "$venv"
}

nsrs_ensure_venv() {
    # NSRS_VENV names nova 34's venv; an older release (NSRS_RELEASE) always takes its own,
    # whatever NSRS_VENV a caller (.ci/run) exported.
    if [ -z "$NSRS_RELEASE" ] && [ -n "${NSRS_VENV:-}" ] && [ "$NSRS_VENV" != "$(nsrs_venv_path)" ]; then
        [ -f "$NSRS_VENV/.nsrs-complete" ] || nsrs_die "NSRS_VENV=$NSRS_VENV is not a complete venv"
        export NSRS_VENV
        return 0
    fi
    NSRS_VENV=$(nsrs_venv_path)
    export NSRS_VENV
    if [ -n "$NSRS_RELEASE" ]; then
        nsrs_build_venv "$NSRS_VENV" "$NSRS_REQUIREMENTS" "venv-nova-$NSRS_RELEASE"
    else
        nsrs_build_venv "$NSRS_VENV" "$NSRS_REQUIREMENTS" venv
    fi
}
