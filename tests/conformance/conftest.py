"""Fixtures for the conformance tests.

Prerequisite: a stack brought up and seeded by scripts/stack.sh (see
scripts/conformance.sh, which does nothing else than run pytest in the stack's
venv). The scheduler under test is started here, once per session:

  NSRS_BIN             the daemon binary  [<repo>/target/release/nova-scheduler-rs]
  NSRS_SCHEDULER_CMD   a whole command instead, split like a shell would;
                       {conf}, {state} and {venv} are replaced. Shorthands:
                       "nova"     = the real nova-scheduler from the venv (an older
                                    release's, as it ships: eventlet-patched),
                       "external" = start nothing, use whatever already consumes
                                    the scheduler queue.
  NSRS_READY_PATTERN   regex marking readiness in its log
                       [scheduler ready|Starting scheduler node]
  NSRS_READY_TIMEOUT   seconds [60]

The daemon's output goes to <state>/logs/scheduler-under-test.log.
"""

import os
import re
import shlex
import signal
import subprocess
import sys
import time
import warnings

os.environ.setdefault("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")  # before nova is imported
warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")

import pytest  # noqa: E402

import nsrs_helpers as H  # noqa: E402

SCHEDULER_QUEUE = "scheduler"


def pytest_report_header(config):
    raw = os.environ.get("NSRS_SCHEDULER_CMD", "").strip()
    if raw == "nova":
        what = f"the real nova-scheduler {H.NOVA_VERSION_STRING} from the venv (reference run)"
    elif raw:
        what = raw
    else:
        what = os.environ.get("NSRS_BIN") or str(H.REPO / "target" / "release" / "nova-scheduler-rs")
    return [f"scheduler under test: {what}", f"stack state: {H.STATE}",
            f"nova's client and objects: nova {H.NOVA_VERSION_STRING}"]


def _log_tail(path, n=80):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except FileNotFoundError:
        return "(no log)"


@pytest.fixture(scope="session")
def conf():
    return H.read_conf()


@pytest.fixture(scope="session")
def cloud_db(conf):
    return H.CloudDB(conf)


@pytest.fixture(scope="session")
def placement(conf):
    return H.Placement(conf)


@pytest.fixture(scope="session")
def seeded(cloud_db):
    """The seeded cloud's compute nodes by uuid, checked to be live right now."""
    if not H.CLOUD_JSON.exists():
        pytest.fail(f"{H.CLOUD_JSON} not found: seed the cloud first (scripts/stack.sh seed ...)")
    states = cloud_db.host_states()
    if not states:
        pytest.fail("no compute nodes in the cell databases: seed the cloud first")
    if not any(h["up"] for h in states.values()):
        pytest.fail("every seeded compute service is down: is scripts/compute_heartbeat.py "
                    "running? (scripts/stack.sh status)")
    return states


@pytest.fixture(scope="session")
def scheduler(conf, seeded):
    """Start the scheduler under test; stop it (its whole process group) at the end."""
    log_path = H.STATE / "logs" / "scheduler-under-test.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    def consumers():
        return H.queue_consumers(conf["DEFAULT"]["transport_url"], SCHEDULER_QUEUE)

    timeout = float(os.environ.get("NSRS_READY_TIMEOUT", "60"))
    raw = os.environ.get("NSRS_SCHEDULER_CMD", "").strip()
    venv = os.path.dirname(os.path.dirname(sys.executable))
    if raw == "external":
        deadline = time.monotonic() + timeout
        while consumers() == 0:
            if time.monotonic() > deadline:
                pytest.fail("NSRS_SCHEDULER_CMD=external but nothing consumes the scheduler queue")
            time.sleep(0.5)
        yield {"cmd": "external", "log": None}
        return
    if raw == "nova":
        raw = "{venv}/bin/nova-scheduler --config-file {conf}"
        if H.NOVA_VERSION[0] < H.NEWEST_NOVA_MAJOR:
            # An older release's services run as it ships them: eventlet-patched.
            raw = "env -u OS_NOVA_DISABLE_EVENTLET_PATCHING " + raw
    if raw:
        cmd = [t.format(conf=H.NOVA_CONF, state=H.STATE, venv=venv) for t in shlex.split(raw)]
    else:
        binary = os.environ.get("NSRS_BIN") or str(H.REPO / "target" / "release" / "nova-scheduler-rs")
        if not os.access(binary, os.X_OK):
            pytest.fail(f"{binary} not found: cargo build --release (or set NSRS_BIN)")
        cmd = [binary, "--config-file", str(H.NOVA_CONF)]

    # A scheduler stopped just before (e.g. the reference run) may take a
    # moment to drop its consumer; anything still there after 15 s is foreign.
    deadline = time.monotonic() + 15
    while (busy := consumers()) and time.monotonic() < deadline:
        time.sleep(0.5)
    if busy:
        pytest.fail(f"{busy} consumer(s) already on queue '{SCHEDULER_QUEUE}' of "
                    f"{conf['DEFAULT']['transport_url']}: "
                    "another scheduler would answer the tests' calls; stop it first")

    ready = re.compile(os.environ.get("NSRS_READY_PATTERN", r"scheduler ready|Starting scheduler node"))
    env = dict(os.environ)
    env.setdefault("RUST_LOG", "info")
    log = open(log_path, "wb")
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, start_new_session=True)

    def group_alive():
        try:
            os.killpg(proc.pid, 0)
            return True
        except ProcessLookupError:
            return False

    def stop():
        """TERM the whole process group (nova-scheduler forks workers), wait
        until every member is gone, KILL what is left after 20 s."""
        if group_alive():
            os.killpg(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                proc.poll()  # reap the leader so the group can empty
                if not group_alive():
                    break
                time.sleep(0.2)
            else:
                os.killpg(proc.pid, signal.SIGKILL)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        log.close()

    try:
        while True:
            with open(log_path, errors="replace") as f:
                if ready.search(f.read()):
                    break
            if proc.poll() is not None:
                pytest.fail(f"scheduler {cmd} exited with {proc.returncode} before it was ready; "
                            f"log {log_path}:\n{_log_tail(log_path)}")
            if time.monotonic() - started > timeout:
                pytest.fail(f"scheduler {cmd} not ready within {timeout:.0f}s (no /{ready.pattern}/ "
                            f"in its log); log {log_path}:\n{_log_tail(log_path)}")
            time.sleep(0.2)
        # Ready in its log is not yet consuming: a call published before the
        # queue exists would be dropped by the broker and only time out.
        while consumers() == 0:
            if proc.poll() is not None or time.monotonic() - started > timeout:
                pytest.fail(f"scheduler {cmd} logged readiness but never consumed queue "
                            f"'{SCHEDULER_QUEUE}'; log {log_path}:\n{_log_tail(log_path)}")
            time.sleep(0.5)
        print(f"\nscheduler under test: {' '.join(cmd)} (ready in {time.monotonic() - started:.1f}s)")
    except BaseException:
        stop()
        raise
    yield {"cmd": cmd, "log": log_path, "proc": proc}
    alive = proc.poll() is None
    stop()
    if not alive:
        pytest.fail(f"the scheduler under test died during the tests; log {log_path}:\n"
                    f"{_log_tail(log_path)}")


@pytest.fixture(scope="session")
def nova(conf):
    """nova's own client side: config parsed from the stack's nova.conf, objects
    registered, RPC initialised. Returns the SchedulerAPI and contexts."""
    import nova.context
    from nova.scheduler import rpcapi

    CONF = H.init_nova_client()
    # The tests call with nova-conductor's timeouts except the overall one:
    # a scheduler that never answers should fail a test in minutes, not 30.
    CONF.set_override("long_rpc_timeout", 180)

    class Nova:
        api = rpcapi.SchedulerAPI()
        admin_ctxt = nova.context.get_admin_context()
        ctxt = H.user_context()
        max_attempts = CONF.scheduler.max_attempts
        multipliers = {
            "ram": CONF.filter_scheduler.ram_weight_multiplier,
            "cpu": CONF.filter_scheduler.cpu_weight_multiplier,
            "disk": CONF.filter_scheduler.disk_weight_multiplier,
            "io_ops": CONF.filter_scheduler.io_ops_weight_multiplier,
        }
        conf = CONF

    return Nova


@pytest.fixture
def instance_uuids(placement):
    """new(n) -> n fresh instance uuids; their allocations are deleted afterwards."""
    made = []

    def new(n=1):
        uuids = [H.new_uuid() for _ in range(n)]
        made.extend(uuids)
        return uuids

    yield new
    for u in made:
        placement.delete_allocations(u)


@pytest.fixture(scope="session")
def big_flavor(seeded, placement):
    """A flavor that exactly the live, enabled hosts with the two largest RAM
    capacities can hold, once each (the seeder's --big-hosts)."""
    eligible = sorted((H.ram_capacity(h, placement), h["host"]) for h in seeded.values()
                      if h["up"] and not h["disabled"])
    if len(eligible) < 3:
        pytest.skip("needs at least 3 live enabled hosts")
    (third, _), (second, h2), (first, h1) = eligible[-3:]
    memory_mb = third + 1024
    if not (second >= memory_mb and first < 2 * memory_mb):
        pytest.skip(f"the seeded cloud has no two big hosts (RAM capacities {eligible[-3:]}); "
                    "seed with --big-hosts 2")
    return H.make_flavor(vcpus=4, memory_mb=memory_mb, root_gb=40), {h1, h2}
