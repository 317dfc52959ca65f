"""`nova-scheduler-rs shadow` beside the scheduler under test (the real
nova-scheduler 34 in the reference run, nova-scheduler-rs in the other): two
shadows take a copy of every call, one with the stack's own nova.conf, one with
ram_weight_multiplier = -1.0 (packing instead of spreading). The calls go
through nova's own RPC client; the scheduler under test answers and claims.

- the shadow with the same configuration agrees (or ties) on every instance;
- the packing shadow reports its changed decisions as `differ`, with
  RAMWeigher as the first differing step;
- neither writes anything: no Placement request but GETs, no services row, no
  reply (nova's client gets exactly one answer per call, or it would fail);
- a shadow stopped with SIGTERM or killed with SIGKILL leaves no queue behind.
"""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

import nsrs_helpers as H

pytestmark = pytest.mark.usefixtures("scheduler")

CALLS = int(os.environ.get("NSRS_SHADOW_CALLS", "30"))
# Flavors the calls cycle through (vcpus, memory_mb, root_gb): varied, so the
# weighers' order moves from call to call.
FLAVORS = [(1, 512, 1), (2, 2048, 10), (1, 1024, 5), (4, 4096, 20)]


def _binary():
    """The daemon binary: NSRS_BIN, else the release build in CARGO_TARGET_DIR (as
    .ci/run keeps it) or the repository's target/."""
    if os.environ.get("NSRS_BIN"):
        return os.environ["NSRS_BIN"]
    target = os.environ.get("CARGO_TARGET_DIR") or str(H.REPO / "target")
    return os.path.join(target, "release", "nova-scheduler-rs")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def _queue_exists(transport_url, queue):
    import amqp

    u = urllib.parse.urlsplit(transport_url.split(",")[0])
    conn = amqp.Connection(host=f"{u.hostname or '127.0.0.1'}:{u.port or 5672}",
                           userid=urllib.parse.unquote(u.username or "guest"),
                           password=urllib.parse.unquote(u.password or "guest"),
                           virtual_host=urllib.parse.unquote(u.path[1:]) or "/",
                           connect_timeout=10)
    conn.connect()
    try:
        conn.channel().queue_declare(queue, passive=True)
        return True
    except amqp.exceptions.NotFound:
        return False
    finally:
        try:
            conn.close()
        except Exception:
            pass


class Shadow:
    def __init__(self, name, overlay, tmp_path, extra=()):
        self.name = name
        self.host = f"shadow-{name}"
        self.queue = f"scheduler_shadow.{self.host}"
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        conf = tmp_path / f"{name}.conf"
        conf.write_text(
            f"[DEFAULT]\nhost = {self.host}\n"
            f"[nova_scheduler_rs]\nhttp_listen = 127.0.0.1:{self.port}\n"
            f"state_dir = {tmp_path / name}\n" + overlay)
        binary = _binary()
        if not os.access(binary, os.X_OK):
            pytest.fail(f"{binary} not found: cargo build --release (or set NSRS_BIN)")
        self.log_path = H.STATE / "logs" / f"shadow-{name}.log"
        self.log = open(self.log_path, "wb")
        env = dict(os.environ, RUST_LOG="info")
        self.proc = subprocess.Popen(
            [binary, "--config-file", str(H.NOVA_CONF), "--config-file", str(conf),
             "shadow", "--settle", "20", *extra],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)

    def log_tail(self, n=40):
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-n:])

    def wait_ready(self, seconds=60):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"shadow {self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if _get(self.url + "/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        pytest.fail(f"shadow {self.name} not ready in {seconds}s:\n{self.log_tail()}")

    def report(self):
        return json.loads(_get(self.url + "/shadow")[1])

    def compared(self):
        return sum(self.report()["instances"].values())

    def metrics(self):
        return _get(self.url + "/metrics")[1]

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture
def shadows(tmp_path):
    started = [Shadow("same", "", tmp_path, ("--record", str(tmp_path / "calls.jsonl.gz"))),
               Shadow("packing", "[filter_scheduler]\nram_weight_multiplier = -1.0\n", tmp_path)]
    try:
        for s in started:
            s.wait_ready()
        yield {s.name: s for s in started}
    finally:
        for s in started:
            s.stop()


def test_shadows_compare_without_writing(nova, conf, cloud_db, placement, instance_uuids, shadows,
                                        tmp_path):
    same, packing = shadows["same"], shadows["packing"]
    expected = 0
    for i in range(CALLS):
        vcpus, memory_mb, root_gb = FLAVORS[i % len(FLAVORS)]
        flavor = H.make_flavor(vcpus=vcpus, memory_mb=memory_mb, root_gb=root_gb)
        n = 2 if i % 5 == 4 else 1
        uuids = instance_uuids(n)
        spec = H.make_spec(nova.ctxt, flavor, uuids)
        nova.api.select_destinations(nova.ctxt, spec, uuids, return_objects=True,
                                     return_alternates=True)
        expected += n
        # Each shadow learns where the call went before the next one, as nova's host
        # manager has consumed it before the next one.
        deadline = time.monotonic() + 30
        while min(same.compared(), packing.compared()) < expected:
            if time.monotonic() > deadline:
                pytest.fail(f"the shadows compared {same.compared()} / {packing.compared()} of "
                            f"{expected} instances in 30 s:\n{same.log_tail()}")
            time.sleep(0.1)

    report = same.report()
    text = json.dumps(report, indent=1)
    assert report["calls"] == CALLS, text
    assert report["instances"]["unknown"] == 0, text
    assert report["instances"]["differ"] == 0, text
    assert report["instances"]["agree"] + report["instances"]["tie"] == expected, text

    packed = packing.report()
    text = json.dumps(packed, indent=1)
    differ = packed["instances"]["differ"]
    assert differ >= CALLS // 3, f"packing should change most decisions:\n{text}"
    ram_first = sum(d["instances"] for d in packed["differences"]
                    if d["step"] == "weigher:RAMWeigher")
    assert ram_first >= 0.95 * differ, text

    # The text report a person reads.
    out = subprocess.run(
        [_binary(), "shadow", "report", "--url", packing.url],
        capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "weigher:RAMWeigher" in out.stdout and "agreement of the known" in out.stdout, out.stdout

    # Nothing written: Placement was only read, no services row was made.
    for s in (same, packing):
        for line in s.metrics().splitlines():
            if line.startswith("nova_scheduler_placement_requests_total{"):
                assert 'method="GET"' in line, f"shadow {s.name} wrote to Placement: {line}"
    databases = [c for _, c in cloud_db.cells().values()] + [conf["database"]["connection"]]
    for url in databases:
        cdb = H.connect(url)
        try:
            with cdb.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM services WHERE host LIKE 'shadow-%%'")
                assert cur.fetchone()[0] == 0, "a shadow registered a service row"
        finally:
            cdb.close()

    # Its queue is bounded, drops the oldest copy when full, and goes with its consumer.
    vhost = urllib.parse.unquote(urllib.parse.urlsplit(conf["DEFAULT"]["transport_url"]).path[1:]) or "/"
    listed = subprocess.run(["rabbitmqctl", "-q", "list_queues", "-p", vhost, "name", "durable",
                             "auto_delete", "arguments"], capture_output=True, text=True,
                            timeout=60).stdout
    line = next((l for l in listed.splitlines() if l.split("\t")[0] == same.queue), None)
    assert line is not None, listed
    assert "\tfalse\ttrue\t" in line and "x-max-length" in line and "drop-head" in line, line

    # Stopped (SIGTERM) or killed (SIGKILL), a shadow leaves no queue behind.
    url = conf["DEFAULT"]["transport_url"]
    assert _queue_exists(url, same.queue) and _queue_exists(url, packing.queue)
    same.stop(signal.SIGTERM)
    packing.stop(signal.SIGKILL)

    # The same shadow recorded every call, with where nova put each instance, and no
    # token (the format line, then a call and its answer per call).
    import gzip
    with gzip.open(tmp_path / "calls.jsonl.gz", "rt") as f:
        records = [json.loads(line) for line in f]
    assert records[0]["format"] == "nova-scheduler-rs recording 1", records[0]
    calls = [r for r in records if r.get("kind") == "call"]
    answers = [r for r in records if r.get("kind") == "answer"]
    assert len(calls) == CALLS and len(answers) == CALLS, (len(calls), len(answers))
    assert all(a["by"] == "nova" and all(i["result"] == "placed" for i in a["instances"])
               for a in answers), answers[:3]
    assert not any("auth_token" in c["context"] for c in calls), calls[0]["context"]
    deadline = time.monotonic() + 15
    while _queue_exists(url, same.queue) or _queue_exists(url, packing.queue):
        assert time.monotonic() < deadline, "a stopped shadow's queue is still on the broker"
        time.sleep(0.3)
