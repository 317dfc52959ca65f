#!/usr/bin/env python3
"""Side-by-side run: nova-scheduler 34 and nova-scheduler-rs on the same seeded
cloud, under the same load (bench/load.py), one after the other.

For each host count: a fresh stack (`scripts/stack.sh up`) seeded with
`scripts/stack.sh seed` (varied sizes, existing instances with allocations,
AZs, aggregates, a few disabled/down hosts; same --seed, so the same cloud for
both schedulers and for every rerun). Then for each scheduler: start it, time
readiness (its consumer on the `scheduler` queue) and the first answer, a few
warm-up calls, then the load phases, with the scheduler's process-group CPU
seconds (utime+stime from /proc/<pid>/stat, all processes of its group: nova
forks a worker) read before and after each phase, and peak RSS (VmHWM) at the
end. Placement's and MariaDB's CPU over each phase is reported too, since a
scheduler that moves work to them is not cheaper. Allocations made by a phase
are deleted before the next, so both schedulers see the seeded cloud.

Each scheduler is measured --rounds times (2 by default), the order reversed
every other round: nova, ours, ours-fast, ours-fast, ours, nova. The stack is
not steady over a run (measured: on a freshly seeded cloud Placement answered
the same question in 48 ms at first and 34 ms three minutes later), and the
reversal lets such a drift weigh on every scheduler alike. The report pools the
rounds (percentiles over every call of every round, CPU over all calls) and
shows each round's p50 beside.

The floor: on each cloud, the RPC round trip (nova's `baseapi` ping through nova's
client and RabbitMQ) plus Placement's write of the claims in the grouping each
scheduler uses. The claims are written alone right after each call of the
sequential phases (bench/placement_floor.py's `PairedClaims`; `--no-paired-floor`
turns it off), in the conditions that call saw: on a 2-core VM the paired one-consumer
`POST`s' median went from 59.2 ms in one turn to 41.7 ms in the next, a minute later,
so a floor taken beside the turns holds calls to another moment's Placement. That floor is still
taken beside every turn and shown. Beside the p50's ratio to the floor, the ratio
to the floor plus nova's objects: the time nova's client spends turning the
RequestSpec and the Selections to and from primitives in each call (bench/load.py's
`time_nova_serializer`), which any scheduler's caller pays and the ping does not.

Active/active: `ours-fast-x2` and `ours-fast-x4` start 2 or 4 daemons of the
`ours-fast` command (each as if on its own host, each with its own log), measured
once all of them consume the `scheduler` queue, their CPU summed. With a
concurrent phase, Placement's own rate of writing the same claims at the same
concurrency (bench/placement_floor.py's `burst-post`) is measured beside every
turn, and the report sets each burst's throughput against it and against one
daemon's.

Run through scripts/bench_side_by_side.sh (it finds the venv and the binary).
Results: <out-dir>/results-<timestamp>.json and a markdown report printed and
written next to it.
"""

import argparse
import datetime
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import load as L  # noqa: E402
import placement_floor as PF  # noqa: E402
import nsrs_helpers as H  # noqa: E402  (load.py put tests/conformance on the path)

REPO = L.REPO
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(f"[{datetime.datetime.now(datetime.timezone.utc):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


# --- /proc ----------------------------------------------------------------------

def proc_stat(pid):
    """(ppid, pgid, cpu seconds) of a process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(")") + 2:].split()
    # fields[0] is field 3 (state): ppid = 4, pgrp = 5, utime = 14, stime = 15
    return int(fields[1]), int(fields[2]), (int(fields[11]) + int(fields[12])) / CLK_TCK


def all_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def group_pids(pgid):
    out = []
    for pid in all_pids():
        st = proc_stat(pid)
        if st and st[1] == pgid:
            out.append(pid)
    return out


def tree_pids(root):
    """root and all its descendants."""
    parents = {}
    for pid in all_pids():
        st = proc_stat(pid)
        if st:
            parents[pid] = st[0]
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        if p in parents:
            out.append(p)
            todo.extend(c for c, pp in parents.items() if pp == p)
    return out


def cpu_seconds(pids):
    return sum((proc_stat(p) or (0, 0, 0.0))[2] for p in pids)


def vm_hwm_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def pids_by_comm(name):
    out = []
    for pid in all_pids():
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == name:
                    out.append(pid)
        except OSError:
            pass
    return out


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# --- the stack -------------------------------------------------------------------

def stack(state, *args, capture=False):
    cmd = [str(REPO / "scripts" / "stack.sh"), *args]
    logf = state / "logs" / "bench-stack.log"
    logf.parent.mkdir(parents=True, exist_ok=True)
    with open(logf, "a") as lf:
        lf.write(f"+ {shlex.join(cmd)}\n")
        lf.flush()
        r = subprocess.run(cmd, stdout=subprocess.PIPE if capture else lf, stderr=lf, text=True)
    if r.returncode:
        sys.exit(f"{shlex.join(cmd)} failed ({r.returncode}); see {logf}")
    return r.stdout


def seed_args(args, n):
    special = max(1, n // 100)
    return ["seed", "--hosts", str(n), "--cells", "2", "--seed", str(args.seed),
            "--big-hosts", str(max(2, special)), "--disabled-hosts", str(max(2, special)),
            "--down-hosts", str(special), "--usage", str(args.usage), "--azs", str(args.azs),
            "--aggregates", str(args.aggregates), "--direct-host-mappings",
            "--workers", str(args.placement_workers)] + (["--nested"] if args.nested else [])


# --- one scheduler ----------------------------------------------------------------

class Scheduler:
    """One scheduler under test: one process group per command (several when
    daemons serve the queue active/active), each with its own log, measured and
    stopped together."""

    def __init__(self, name, cmds, logpaths, env):
        self.name, self.cmds, self.logpaths, self.env = name, cmds, logpaths, env
        self.procs = []

    def start(self):
        self.logfs = [open(path, "wb") for path in self.logpaths]
        self.started = time.perf_counter()
        self.procs = [subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=self.env, start_new_session=True)
                      for cmd, logf in zip(self.cmds, self.logfs)]

    def pids(self):
        return [pid for proc in self.procs for pid in group_pids(proc.pid)]

    def alive(self):
        return all(proc.poll() is None for proc in self.procs)

    def stop(self):
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for proc in self.procs:
                proc.poll()
            if not self.pids():
                break
            time.sleep(0.2)
        else:
            for proc in self.procs:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for logf in self.logfs:
            logf.close()


def wait_consumers(transport_url, want, timeout, sched=None):
    """Until the `scheduler` queue has at least `want` consumers (each of our
    daemons has one there), or none when `want` is 0."""
    deadline = time.monotonic() + timeout
    while True:
        n = H.queue_consumers(transport_url)
        if (n >= want > 0) or n == want == 0:
            return
        if sched is not None and not sched.alive():
            sys.exit(f"{sched.name} exited before it consumed the scheduler queue; "
                     f"logs {', '.join(map(str, sched.logpaths))}")
        if time.monotonic() > deadline:
            sys.exit(f"{n} consumers on the scheduler queue after {timeout}s, waiting for "
                     f"{want or 'none'}")
        time.sleep(0.05)


class Scraper:
    """Fetches /metrics and /readyz every NSRS_SCRAPE_INTERVAL seconds (default 15, as
    Prometheus's default scrape interval), as Prometheus and a load balancer would,
    while a scheduler is measured."""

    def __init__(self, port):
        import threading
        self.port, self.stop, self.scrapes = port, threading.Event(), 0
        self.interval = float(os.environ.get("NSRS_SCRAPE_INTERVAL", "15"))
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        import urllib.request
        while not self.stop.wait(self.interval):
            for path in ("/metrics", "/readyz"):
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as r:
                        r.read()
                    self.scrapes += 1
                except OSError:
                    pass

    def close(self):
        self.stop.set()
        self.thread.join()
        return self.scrapes


def measure_scheduler(load, args, name, cmds, env, tag, transport_url):
    """Start the scheduler (`cmds`: one command per daemon), wait until each daemon
    consumes the `scheduler` queue, run the load phases, stop it."""
    state = load.state_dir
    logpaths = [state / "logs" / (f"bench-{name}-{tag}.log" if k == 0
                                  else f"bench-{name}-{tag}-{k + 1}.log") for k in range(len(cmds))]
    wait_consumers(transport_url, 0, 30)
    sched = Scheduler(name, cmds, logpaths, env)
    for cmd, path in zip(cmds, logpaths):
        log(f"{name}: starting {shlex.join(cmd)} (log {path})")
    sched.start()
    out = {"scheduler": name, "daemons": len(cmds), "command": shlex.join(cmds[0]),
           "log": str(logpaths[0]), "logs": [str(p) for p in logpaths]}
    scraper = Scraper(OBSERVED_PORT) if name == "ours-fast-observed" else None
    try:
        # Ready once every daemon consumes: before that, RabbitMQ would hand the
        # first calls to fewer daemons than are measured.
        wait_consumers(transport_url, len(cmds), args.ready_timeout, sched)
        out["ready_s"] = round(time.perf_counter() - sched.started, 3)
        first = load.call(1)
        out["first_answer_s"] = round(time.perf_counter() - sched.started, 3)
        out["first_call_ms"] = round(first[0] * 1000, 1)
        out["first_call_error"] = first[3]
        load.cleanup([first])
        if args.compute_sync:
            sync_instance_info(load)
        for _ in range(args.warmup):
            load.cleanup([load.call(1)])
        out["rpc_ping_ms"] = rpc_ping_ms(load)
        log(f"{name}: ready {out['ready_s']}s, first answer {out['first_answer_s']}s, "
            f"RPC ping {out['rpc_ping_ms']} ms")
        placement_pids = tree_pids(int((state / "placement.pid").read_text().strip()))
        mariadb_pids = pids_by_comm("mariadbd") or pids_by_comm("mysqld")
        out["phases"] = []
        # The claim floor paired with each call of the sequential phases, in the
        # grouping this scheduler claims in; Placement's and MariaDB's CPU for it is
        # kept out of theirs per call.
        paired_cpu = [0.0, 0.0]
        paired = None
        if args.paired_floor and not load.nested:
            writer = PF.PairedClaims(load.conf, load.want, put=not name.startswith("ours-fast"))

            def paired(k):
                before = (cpu_seconds(placement_pids), cpu_seconds(mariadb_pids))
                took = writer.write(k)
                paired_cpu[0] += cpu_seconds(placement_pids) - before[0]
                paired_cpu[1] += cpu_seconds(mariadb_pids) - before[1]
                return took

        def report(r):
            L.print_phase(r, sys.stderr)

        for attr in ("single", "multi", "concurrency"):
            if not getattr(args, attr):
                continue
            # One phase at a time, so CPU can be read around each.
            sub = argparse.Namespace(**vars(args))
            for other in ("single", "multi", "concurrency"):
                if other != attr:
                    setattr(sub, other, 0)
            pids = sched.pids()
            before = (cpu_seconds(pids), cpu_seconds(placement_pids), cpu_seconds(mariadb_pids),
                      time.perf_counter(), loadavg())
            access_from = placement_access_offset(state)
            paired_cpu[:] = [0.0, 0.0]
            [r] = L.run_phases(load, sub, logpaths, report, paired)
            pids = sched.pids()
            after = (cpu_seconds(pids), cpu_seconds(placement_pids) - paired_cpu[0],
                     cpu_seconds(mariadb_pids) - paired_cpu[1])
            r["scheduler_cpu_s"] = round(after[0] - before[0], 3)
            r["placement_cpu_s"] = round(after[1] - before[1], 3)
            r["mariadb_cpu_s"] = round(after[2] - before[2], 3)
            # The phase's wall time includes validation and cleanup after the calls;
            # CPU is read after them too, but neither scheduler works then.
            r["scheduler_cpu_ms_per_call"] = round(r["scheduler_cpu_s"] / r["calls"] * 1000, 1)
            r["placement_cpu_ms_per_call"] = round(r["placement_cpu_s"] / r["calls"] * 1000, 1)
            r["mariadb_cpu_ms_per_call"] = round(r["mariadb_cpu_s"] / r["calls"] * 1000, 1)
            r["placement_own"] = placement_own_time(state, access_from, r["calls"])
            r["loadavg_before"] = before[4]
            r["loadavg_after"] = loadavg()
            out["phases"].append(r)
        hwm = {pid: vm_hwm_kb(pid) for pid in sched.pids()}
        out["vm_hwm_kb_max"] = max(hwm.values(), default=0)
        out["vm_hwm_kb_sum"] = sum(hwm.values())
        out["processes"] = len(hwm)
        out["alive_at_end"] = sched.alive()
        # Candidates questions the provider index left to Placement (ours-fast).
        out["candidates_fallbacks"] = sum(path.read_text(errors="replace").count(
            "fallback to Placement") for path in logpaths if path.exists())
    finally:
        if scraper is not None:
            out["scrapes"] = scraper.close()
        sched.stop()
    return out


def measure_cloud(args, state, venv, n):
    """The schedulers, one after the other, on the cloud seeded now: --rounds
    times, the order reversed every other round (nova, ours, ours, nova for two),
    then pooled per scheduler."""
    load = L.Load(state, tuple(int(x) for x in args.flavor.split(",")), nested=args.nested)
    transport_url = load.conf["DEFAULT"]["transport_url"]
    run = {"hosts": n, "allocation_candidates_ms": allocation_candidates_ms(load), "schedulers": []}
    names = args.schedulers.split(",")
    for k in range(args.rounds):
        for name in (names if k % 2 == 0 else names[::-1]):
            tag = f"{n}" if args.rounds == 1 else f"{n}-r{k + 1}"
            # The claim floor beside every scheduler's turn: Placement drifts over a
            # run, and the report takes the median of all of them.
            floor = claim_floor_ms(load, args)
            measured = measure_one(load, args, state, venv, name, tag, transport_url)
            measured["round"] = k + 1
            measured["claim_floor_ms"] = floor
            run["schedulers"].append(measured)
    run["pooled"] = pool(run["schedulers"])
    return run


# Our daemon's variants: as nova asks Placement, the fast path, without the read-ahead,
# "ours" and "ours-fast" run from another build (--baseline-bin: a change against the build
# before it),
# and the fast path served by 2 or 4 daemons at once (active/active).
OURS = ("ours", "ours-fast", "ours-no-read-ahead", "ours-baseline", "ours-fast-baseline",
        "ours-fast-bare",
        "ours-fast-observed", "ours-fast-x2", "ours-fast-x4")


def daemon_count(name):
    """How many daemons serve the queue for a scheduler name: N for `...-xN`, else 1."""
    base, _, n = name.rpartition("-x")
    return int(n) if base and n.isdigit() else 1


def base_name(name):
    """The one-daemon variant of a scheduler name (`ours-fast` for `ours-fast-x2`)."""
    return name.rpartition("-x")[0] if daemon_count(name) > 1 else name

# The listener port of "ours-fast-observed", scraped while it is measured.
OBSERVED_PORT = 9181


def measure_one(load, args, state, venv, name, tag, transport_url):
    """Start one scheduler, run the load phases against it, stop it."""
    env = dict(os.environ)
    if name == "nova":
        cmd = [str(venv / "bin" / "nova-scheduler"), "--config-file", str(state / "nova.conf")]
    elif name in OURS:
        binary = args.baseline_bin if name.endswith("-baseline") else args.bin
        cmd = [binary, "--config-file", str(state / "nova.conf")]
        if name.startswith("ours-fast"):
            # The Placement fast path: the same nova.conf plus a read-only
            # connection to Placement's database (candidates computed locally,
            # Placement asked only to claim).
            cmd += ["--config-file", str(fast_path_conf(state))]
        if name == "ours-no-read-ahead":
            # nova's order exactly: each claim's GET /allocations only when the
            # claim is made, not beside the candidates question.
            cmd += ["--config-file", str(extra_conf(state, "no-read-ahead.conf", "nova_scheduler_rs",
                                                    "read_allocations_ahead = false"))]
        if name == "ours-fast-bare":
            # No ring of recent decisions, no listener: what observability costs is
            # "ours-fast-observed" against this.
            cmd += ["--config-file", str(extra_conf(state, "bare.conf", "nova_scheduler_rs",
                                                    "decision_ring_size = 0"))]
        if name == "ours-fast-observed":
            cmd += ["--config-file", str(extra_conf(state, "observed.conf", "nova_scheduler_rs",
                                                    f"http_listen = 127.0.0.1:{OBSERVED_PORT}"))]
        # The per-request timings line is a debug event of the manager.
        env.setdefault("RUST_LOG", "info,nova_scheduler::manager=debug")
    else:
        raise ValueError(f"unknown scheduler {name!r}")
    # Active/active: the second daemon on, each as if on a host of its own (its own
    # `services` row, `scheduler.<host>` queue and record of requests in flight, which
    # two daemons with one `[DEFAULT] host` would share).
    host = load.conf["DEFAULT"]["host"]
    cmds = [cmd] + [cmd + ["--config-file", str(extra_conf(state, f"daemon-{k}.conf", "DEFAULT",
                                                           f"host = {host}-{k}"))]
                    for k in range(2, daemon_count(name) + 1)]
    return measure_scheduler(load, args, name, cmds, env, tag, transport_url)


def pool(measured):
    """Per scheduler (in the order first measured) and phase, its rounds as one:
    latency percentiles over every call of every round, CPU per call over all
    calls, counts summed; the p50 of each round kept beside."""
    out = []
    for name in dict.fromkeys(m["scheduler"] for m in measured):
        mine = [m for m in measured if m["scheduler"] == name]
        phases = []
        for ph in dict.fromkeys(p["phase"] for m in mine for p in m["phases"]):
            ps = [p for m in mine for p in m["phases"] if p["phase"] == ph]
            calls = sum(p["calls"] for p in ps)
            wall = sum(p["wall_s"] for p in ps)
            ok_instances = sum(p["ok"] * p["instances_per_call"] for p in ps)

            def total(key):
                vals = [p.get(key) for p in ps]
                return None if any(v is None for v in vals) else sum(vals)

            def per_call(key):
                t = total(key)
                return round(t / calls * 1000, 1) if t is not None and calls else None

            own = [p["placement_own"] for p in ps]
            errors = {}
            for p in ps:
                for e, n in p["errors"].items():
                    errors[e] = errors.get(e, 0) + n
            phases.append({
                "phase": ph, "rounds": len(ps), "callers": ps[0]["callers"], "calls": calls,
                "instances_per_call": ps[0]["instances_per_call"], "ok": total("ok"),
                "no_valid_host": total("no_valid_host"), "claim_conflicts": total("claim_conflicts"),
                "validation_problem_count": total("validation_problem_count"),
                "over_capacity": total("over_capacity"), "errors": errors,
                "allocations_left_after_cleanup": total("allocations_left_after_cleanup"),
                "wall_s": round(wall, 3),
                "instances_per_s": round(ok_instances / wall, 3) if wall else None,
                "instances_per_s_by_round": [p["instances_per_s"] for p in ps],
                **L.summarize_latencies([ms / 1000 for p in ps for ms in p["latencies_ms"]]),
                "p50_ms_by_round": [p["p50_ms"] for p in ps],
                "paired_claim_p50_ms": (
                    round(statistics.median(ms for p in ps for ms in p["paired_claim_ms"]), 2)
                    if all(p.get("paired_claim_ms") for p in ps) else None),
                "client_objects_p50_ms": (
                    round(statistics.median(ms for p in ps for ms in p["client_objects_ms"]), 2)
                    if all(p.get("client_objects_ms") for p in ps) else None),
                "scheduler_cpu_ms_per_call": per_call("scheduler_cpu_s"),
                "placement_cpu_ms_per_call": per_call("placement_cpu_s"),
                "mariadb_cpu_ms_per_call": per_call("mariadb_cpu_s"),
                "placement_own_ms_per_call": (
                    None if any(o is None for o in own)
                    else round(sum(o["ms_per_call"] * p["calls"] for o, p in zip(own, ps)) / calls, 1)),
            })
        out.append({"scheduler": name, "daemons": mine[0].get("daemons", 1), "phases": phases,
                    "vm_hwm_kb_max": max(m["vm_hwm_kb_max"] for m in mine)})
    return out


def extra_conf(state, file_name, section, line):
    """A one-option config file given after the stack's nova.conf."""
    path = state / file_name
    path.write_text(f"# Generated by bench/side_by_side.py.\n[{section}]\n{line}\n")
    return path


def fast_path_conf(state):
    """An extra config file giving our daemon `[placement_database] connection`,
    the database Placement itself uses (from the stack's placement.conf)."""
    import configparser
    pconf = configparser.ConfigParser(interpolation=None)
    pconf.read(state / "placement" / "placement.conf")
    url = pconf["placement_database"]["connection"]
    path = state / "fast-path.conf"
    path.write_text("# Generated by bench/side_by_side.py for the ours-fast runs.\n"
                    f"[placement_database]\nconnection = {url}\n")
    return path


def sync_instance_info(load):
    """What every nova-compute casts to the schedulers every
    scheduler_instance_sync_interval (120 s): the uuids of its instances. Once
    nova's HostManager has a host's list confirmed ("updated") it stops reading
    that host's instances from the cell database on every request, as in a
    cloud with running computes. Sent twice (the first may only create the
    entry); our daemon accepts and ignores the cast."""
    per_host = {h["name"]: [] for h in load.hosts.values()}
    for _, (_, url) in H.CloudDB(load.conf).cells().items():
        conn = H.connect(url)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT host, uuid FROM instances WHERE deleted = 0 AND host IS NOT NULL")
                for host, u in cur.fetchall():
                    per_host.setdefault(host, []).append(u)
        finally:
            conn.close()
    for _ in range(2):
        for host, uuids in per_host.items():
            load.api.sync_instance_info(load.admin, host, uuids)
        time.sleep(2)


def claim_floor_ms(load, args, repeat=7, burst_repeat=3):
    """What Placement alone takes to write the claims of a call, with no scheduling
    (bench/placement_floor.py): nova's `PUT` of one instance, one instance in a
    `POST /allocations` (the batched claim) and ten in one; with a concurrent phase,
    also its claims in its shape (`burst-post`: as many callers at once, each as many
    `POST`s of as many instances as the phase's calls), which bounds the burst's
    throughput (fewer runs: a burst takes seconds to write and free). Medians. None
    on a --nested cloud, whose claims span several providers per instance."""
    if load.nested:
        return None
    out = {}
    plan = [(("put-1", "post-1", "post-10"), repeat)]
    if args.concurrency:
        plan.append((("burst-post",), burst_repeat))
    for shapes, runs in plan:
        try:
            found = PF.measure(load.conf, load.want, runs, shapes=shapes,
                               log=lambda m: log(f"claim floor: {m}"),
                               burst=(args.concurrency, args.per_caller, args.instances))
        except RuntimeError as e:
            log(f"claim floor {', '.join(shapes)} not measured: {e}")
            continue
        out.update({shape: v["median_ms"] for shape, v in found["shapes"].items()})
    return out or None


def rpc_ping_ms(load, n=30):
    """The RPC floor: median of `n` calls of nova's `baseapi` ping (namespace
    `baseapi`, answered by any nova service) through nova's own client and RabbitMQ
    to the scheduler just started; what every `select_destinations` pays at least."""
    from nova import baserpc
    api = baserpc.BaseAPI("scheduler")
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        api.ping(load.ctxt, "floor", timeout=30)
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1000, 2)


def allocation_candidates_ms(load, n=5):
    """Median time of Placement's GET /allocation_candidates for the bench
    flavor, asked the way nova asks it (limit = max_placement_results)."""
    query = {"resources": load.H.resources_query(load.flavor),
             "root_required": "OWNER_NOVA,!COMPUTE_STATUS_DISABLED", "limit": 1000}
    if load.nested:
        query.update({"resources1": "VGPU:1",
                      "resources2": "NET_BW_EGR_KILOBIT_PER_SEC:1000,NET_BW_IGR_KILOBIT_PER_SEC:1000",
                      "required2": "CUSTOM_PHYSNET_PUBLIC,CUSTOM_VNIC_TYPE_NORMAL",
                      "group_policy": "none"})
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        load.placement.get("/allocation_candidates", **query)
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1000, 1)


# --- report ---------------------------------------------------------------------

def placement_access_offset(state):
    path = state / "logs" / "placement-access.log"
    return path.stat().st_size if path.exists() else None


def placement_own_time(state, start, calls):
    """Placement's own time (gunicorn's request time, from the request read to the
    answer written) for the scheduler's requests logged since `start`: the bench's
    own requests (validation, cleanup) say so in their User-Agent and are left out.
    Per call, and per kind of question; beside them, the bench's own claim writes
    (the paired floor's `POST`s and `PUT`s), in the same conditions. None when the
    log is not in the format scripts/stack.sh sets (a stack started before it)."""
    path = state / "logs" / "placement-access.log"
    if start is None or not path.exists():
        return None
    with open(path, "rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    by_kind, floor_writes = {}, {}
    for line in text.splitlines():
        m = H.PLACEMENT_ACCESS_LINE.match(line)
        if not m:
            return None
        path_only = m["uri"].split("?", 1)[0]
        kind = f"{m['method']} " + ("/allocations/{uuid}" if path_only.startswith("/allocations/")
                                   else path_only)
        ms = float(m["seconds"]) * 1000
        if m["agent"] == H.HELPER_USER_AGENT:
            if kind in ("POST /allocations", "PUT /allocations/{uuid}"):
                floor_writes.setdefault(kind, []).append(ms)
            continue
        by_kind.setdefault(kind, []).append(ms)
    total = sum(sum(v) for v in by_kind.values())

    def medians(kinds):
        return {k: {"count": len(v), "median_ms": round(statistics.median(v), 1)}
                for k, v in sorted(kinds.items())}

    return {
        "ms_per_call": round(total / calls, 1) if calls else None,
        "by_question": medians(by_kind),
        "floor_writes": medians(floor_writes),
    }


def ratio(a, b):
    return f"{a / b:.1f}x" if a and b else "-"


def floor_lines(results):
    """Each scheduler's p50 against the floor measured on the same cloud: the RPC
    round trip (its own baseapi ping, median over rounds) plus Placement's claim
    write in the grouping the scheduler uses (one PUT per instance for nova and
    `ours`, a lower bound for them since nova also reads each consumer first; one
    POST per call for `ours-fast`). The write is the median of the writes paired
    with the phase's calls when they were made, else of those measured beside the
    turns. Beside it, the floor plus nova's objects: what nova's client spends in
    the calling thread turning the RequestSpec and the Selections to and from
    primitives (median per call, bench/load.py's `time_nova_serializer`), which the
    ping does not do and any scheduler's caller pays."""
    lines = []
    for run in results["runs"]:
        measured = [m["claim_floor_ms"] for m in run["schedulers"]
                    if "put-1" in (m.get("claim_floor_ms") or {})]
        paired_any = any(p.get("paired_claim_p50_ms") for s in run["pooled"] for p in s["phases"])
        if not measured and not paired_any:
            continue
        claim = None
        if measured:
            claim = {shape: statistics.median(f[shape] for f in measured)
                     for shape in ("put-1", "post-1", "post-10")}
            lines.append(f"Floors at {run['hosts']:,} hosts (same run, medians of {len(measured)} "
                         f"measurements beside the schedulers' turns): Placement writes one "
                         f"instance's claim in {claim['put-1']:.1f} ms (PUT), {claim['post-1']:.1f} "
                         f"ms (POST), ten in one POST in {claim['post-10']:.1f} ms.")
            lines.append("")
        lines.append("| scheduler | RPC ping | phase | p50 | claims written alone | floor (ping + claims) "
                     "| p50 / floor | nova's objects | p50 / (floor + objects) |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for s in run["pooled"]:
            pings = [m["rpc_ping_ms"] for m in run["schedulers"]
                     if m["scheduler"] == s["scheduler"] and m.get("rpc_ping_ms")]
            if not pings:
                continue
            ping = statistics.median(pings)
            batched = s["scheduler"].startswith("ours-fast")
            for p in s["phases"]:
                k = p["instances_per_call"]
                if p["callers"] > 1 or p.get("p50_ms") is None:
                    continue
                if p.get("paired_claim_p50_ms") is not None:
                    write, how = p["paired_claim_p50_ms"], "paired"
                elif claim is None:
                    continue
                elif batched:
                    write = claim["post-1"] if k == 1 else claim["post-10"] * k / 10
                    how = "beside turns"
                else:
                    write, how = claim["put-1"] * k, "beside turns"
                floor = ping + write
                objects = p.get("client_objects_p50_ms")
                with_objects = (f"{objects:.2f} ms | {p['p50_ms'] / (floor + objects):.2f}"
                                if objects is not None else "- | -")
                lines.append(f"| {s['scheduler']} | {ping:.1f} ms | {p['phase']} ({k} inst) "
                             f"| {p['p50_ms']:.1f} ms | {write:.1f} ms ({how}) | {floor:.1f} ms "
                             f"| {p['p50_ms'] / floor:.2f} | {with_objects} |")
    return lines


def burst_lines(results):
    """The concurrent phase against Placement's own claim rate for the same claims:
    per scheduler (and so per number of daemons serving the queue), the burst's
    throughput over `burst-post`'s (the same callers, calls and instances claimed
    straight in Placement, measured beside every scheduler's turn: the median over
    the run, and the one beside each turn for that round's ratio), its latency, the
    single calls' p50, calls answered, providers over capacity, and throughput
    against the same scheduler served by one daemon."""
    lines = []
    for run in results["runs"]:
        turns = [m for m in run["schedulers"] if (m.get("claim_floor_ms") or {}).get("burst-post")]
        conc = [(s, p) for s in run["pooled"] for p in s["phases"] if p["phase"] == "concurrent"]
        if not turns or not conc:
            continue
        args = results["args"]
        callers, per_caller, k = args["concurrency"], args["per_caller"], args["instances"]
        instances = callers * per_caller * k

        def rate(ms):
            return instances / (ms / 1000)

        rates = [rate(m["claim_floor_ms"]["burst-post"]) for m in turns]
        placement = statistics.median(rates)
        lines.append(f"Concurrent burst at {run['hosts']:,} hosts: {callers} callers at once, each "
                     f"{per_caller} call(s) of {k} instances. Placement's own claim rate for the same "
                     f"claims ({callers} callers, each {per_caller} POST(s) of {k} consumers, no "
                     f"scheduler): {placement:.1f} instances/s (median of {len(rates)} measurements "
                     f"beside the schedulers' turns, {min(rates):.1f}-{max(rates):.1f}).")
        lines.append("")
        lines.append("| scheduler | daemons | instances/s | by round | this / Placement (by round) "
                     "| this / 1 daemon | p50 | p95 | single p50 | answered | errors "
                     "| over capacity | conflicts | CPU/call |")
        lines.append("|" + "---|" * 14)
        one = {s["scheduler"]: p["instances_per_s"] for s, p in conc if s.get("daemons", 1) == 1}
        for s, p in conc:
            mine = [m for m in run["schedulers"] if m["scheduler"] == s["scheduler"]]
            by_round = [
                f"{ph['instances_per_s'] / rate(m['claim_floor_ms']['burst-post']):.2f}"
                for m in mine for ph in m["phases"]
                if ph["phase"] == "concurrent" and (m.get("claim_floor_ms") or {}).get("burst-post")]
            single = next((q for q in s["phases"] if q["phase"] == "single"), {})
            base = one.get(base_name(s["scheduler"]))
            vs_one = f"{p['instances_per_s'] / base:.2f}" if base else "-"
            lost = p["errors"].get("MessagingTimeout", 0)
            errors = ", ".join(f"{e} {n}" for e, n in sorted(p["errors"].items())) or "0"
            lines.append(
                f"| {s['scheduler']} | {s.get('daemons', 1)} | {p['instances_per_s']:.1f} "
                f"| {' / '.join(f'{v:.1f}' for v in p['instances_per_s_by_round'])} "
                f"| {p['instances_per_s'] / placement:.2f} ({' / '.join(by_round)}) "
                f"| {vs_one} "
                f"| {p['p50_ms']:,.0f} ms | {p['p95_ms']:,.0f} ms "
                f"| {single.get('p50_ms', '-')} ms | {p['calls'] - lost} / {p['calls']} | {errors} "
                f"| {p['over_capacity']} | {p['claim_conflicts']} "
                f"| {p['scheduler_cpu_ms_per_call']} ms |")
    return lines


def markdown(results):
    """One row per host count, phase and scheduler; ratios are nova's figure over
    this scheduler's (latency, CPU) or this scheduler's over nova's (throughput)."""
    lines = []
    m = results["machine"]
    lines.append(f"Run {results['started']} - {results['finished']} on {m['nproc']} CPUs, "
                 f"{m['mem_gib']} GiB RAM, {m['kernel']}; load average at start {m['loadavg_start']}.")
    lines.append(f"Command: `{results['command']}`")
    lines.append("")
    rounds = results["args"].get("rounds", 1)
    if rounds > 1:
        lines.append(f"Each scheduler measured in {rounds} rounds, the order reversed every other "
                     "round; the table pools them (percentiles over every call, CPU over all calls), "
                     "with each round's p50 beside.")
        lines.append("")
    lines.append("| hosts | phase | calls x inst | scheduler | p50 | p50 by round | p95 | p50 nova/this "
                 "| CPU/call | CPU nova/this | instances/s | inst/s this/nova | NoValidHost | conflicts "
                 "| invalid |")
    lines.append("|" + "---|" * 15)

    def fmt(v, unit="ms"):
        if v is None:
            return "-"
        return f"{v:,.0f} {unit}" if v >= 100 else f"{v:,.1f} {unit}"

    for run in results["runs"]:
        pooled = run["pooled"]
        nova = next((s for s in pooled if s["scheduler"] == "nova"), None)
        phases = [p["phase"] for p in pooled[0]["phases"]]
        for ph in phases:
            pn = next((p for p in nova["phases"] if p["phase"] == ph), None) if nova else None
            for s in pooled:
                p = next((p for p in s["phases"] if p["phase"] == ph), None)
                if p is None:
                    continue
                calls = f"{p['calls']} x {p['instances_per_call']}"
                if p["callers"] > 1:
                    calls += f" ({p['callers']} callers)"
                is_nova = s["scheduler"] == "nova"

                def vs(k, inverse=False):
                    if is_nova or pn is None:
                        return "-"
                    return ratio(p.get(k), pn.get(k)) if inverse else ratio(pn.get(k), p.get(k))

                by_round = " / ".join(fmt(v) for v in p["p50_ms_by_round"])
                lines.append(
                    f"| {run['hosts']:,} | {ph} | {calls} | {s['scheduler']} | {fmt(p.get('p50_ms'))} "
                    f"| {by_round} | {fmt(p.get('p95_ms'))} | {vs('p50_ms')} "
                    f"| {fmt(p.get('scheduler_cpu_ms_per_call'))} "
                    f"| {vs('scheduler_cpu_ms_per_call')} | {p.get('instances_per_s') or '-'} "
                    f"| {vs('instances_per_s', inverse=True)} | {p['no_valid_host']} "
                    f"| {p['claim_conflicts']} | {p['validation_problem_count']} |")
    lines.append("")
    floors = floor_lines(results)
    if floors:
        lines += floors
        lines.append("")
    bursts = burst_lines(results)
    if bursts:
        lines += bursts
        lines.append("")
    lines.append("| hosts | scheduler | round | ready | first answer | peak RSS (largest process) "
                 "| RSS sum of group | Placement CPU/call (single) | MariaDB CPU/call (single) "
                 "| GET /allocation_candidates | Placement's own time/call (single) "
                 "| candidates left to Placement by the index |")
    lines.append("|" + "---|" * 12)
    for run in results["runs"]:
        for s in run["schedulers"]:
            single = next((p for p in s["phases"] if p["phase"] == "single"), {})
            lines.append(
                f"| {run['hosts']:,} | {s['scheduler']} | {s.get('round', 1)} | {s['ready_s']} s "
                f"| {s['first_answer_s']} s "
                f"| {s['vm_hwm_kb_max'] / 1024:.0f} MiB | {s['vm_hwm_kb_sum'] / 1024:.0f} MiB "
                f"({s['processes']} proc) | {single.get('placement_cpu_ms_per_call', '-')} ms "
                f"| {single.get('mariadb_cpu_ms_per_call', '-')} ms "
                f"| {run['allocation_candidates_ms']} ms "
                f"| {(single.get('placement_own') or {}).get('ms_per_call', '-')} ms "
                f"| {s.get('candidates_fallbacks', '-') if s['scheduler'].startswith('ours-fast') else '-'} |")
    def who(s):
        return s["scheduler"] if rounds == 1 else f"{s['scheduler']} (round {s.get('round', 1)})"

    own = [(run["hosts"], who(s), p) for run in results["runs"] for s in run["schedulers"]
           for p in s["phases"] if p.get("placement_own")]
    if own:
        lines.append("")
        lines.append("Placement's own time for each scheduler's questions (gunicorn's request time in "
                     "its access log; count and median per kind):")
        lines.append("")
        for hosts, name, p in own:
            lines.append(f"- {hosts:,} hosts, {name}, {p['phase']}: "
                         f"{p['placement_own']['ms_per_call']} ms per call; " +
                         ", ".join(f"{k} {v['count']} x {v['median_ms']} ms"
                                   for k, v in p["placement_own"]["by_question"].items()) +
                         "".join(f"; the paired floor's {k} {v['count']} x {v['median_ms']} ms"
                                 for k, v in (p["placement_own"].get("floor_writes") or {}).items()))
    phases_seen = [(run["hosts"], who(s), p) for run in results["runs"] for s in run["schedulers"]
                   for p in s["phases"] if p["daemon_phases"]]
    if phases_seen:
        lines.append("")
        lines.append("Daemon's own timings (medians of the `*_ms` fields of its `select_destinations done` lines):")
        lines.append("")
        for hosts, name, p in phases_seen:
            lines.append(f"- {hosts:,} hosts, {name}, {p['phase']}: " +
                         ", ".join(f"{k} {v['median']}" for k, v in p["daemon_phases"].items()))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--hosts", default="100,1000", help="comma-separated host counts")
    ap.add_argument("--schedulers", default="nova,ours,ours-fast",
                    help="which to run, in this order: nova, ours (asks Placement as nova does), "
                         "ours-fast (the Placement fast path), ours-no-read-ahead (ours with "
                         "read_allocations_ahead = false), ours-baseline and ours-fast-baseline "
                         "(ours and ours-fast from --baseline-bin), "
                         "ours-fast-bare (ours-fast with no decision ring and no listener), "
                         "ours-fast-observed (ours-fast with the HTTP listener scraped every "
                         "NSRS_SCRAPE_INTERVAL seconds, default 15), ours-fast-x2 and "
                         "ours-fast-x4 (ours-fast served by 2 or 4 daemons consuming the "
                         "scheduler queue at once, active/active)")
    ap.add_argument("--bin", required=True, help="the nova-scheduler-rs binary")
    ap.add_argument("--baseline-bin", default=None,
                    help="another nova-scheduler-rs binary, run as 'ours-baseline' or "
                         "'ours-fast-baseline' (for example "
                         "the build before a change, measured in the same rounds as the change)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--nested", action="store_true",
                    help="seed provider trees and shared disk pools (seed_cloud.py --nested) "
                         "and ask for a vGPU and bandwidth in granular groups")
    ap.add_argument("--usage", type=float, default=0.4)
    ap.add_argument("--azs", type=int, default=3)
    ap.add_argument("--aggregates", type=int, default=4)
    ap.add_argument("--placement-workers", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2,
                    help="measure the schedulers this many times on each cloud, the order reversed "
                         "every other round (nova, ours, ours, nova), and pool the rounds: the stack "
                         "drifts (Placement answers faster minutes after seeding than at first), "
                         "and alternating lets the drift weigh on each scheduler alike")
    ap.add_argument("--reuse-stack", action="store_true",
                    help="use the stack and cloud as they are (one host count only)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--paired-floor", action=argparse.BooleanOptionalAction, default=True,
                    help="after each call of the sequential phases, Placement writes the same "
                         "claims alone (the claim floor in the call's own conditions); off: the "
                         "calls run back to back and only the floor beside the turns is taken")
    ap.add_argument("--compute-sync", action=argparse.BooleanOptionalAction, default=True,
                    help="cast sync_instance_info for every host after startup, as running "
                         "nova-computes do (nova then stops reading instances per request)")
    ap.add_argument("--ready-timeout", type=float, default=300)
    ap.add_argument("--out-dir", default=None)
    ap.add_argument("--command-line", default=None, help="shown in the report")
    ap.add_argument("--measure-only", metavar="RUN_JSON", help=argparse.SUPPRESS)
    L.add_load_args(ap)
    ap.set_defaults(single=30, multi=5, concurrency=10)
    args = ap.parse_args()

    unknown = set(args.schedulers.split(",")) - {"nova", *OURS}
    if unknown:
        sys.exit(f"unknown schedulers {sorted(unknown)} (nova, {', '.join(OURS)})")
    if args.rounds < 1:
        sys.exit("--rounds must be at least 1")
    baselines = [n for n in args.schedulers.split(",") if n.endswith("-baseline")]
    if baselines and not (args.baseline_bin and os.access(args.baseline_bin, os.X_OK)):
        sys.exit(f"{baselines[0]} needs --baseline-bin, an executable nova-scheduler-rs binary")
    if set(OURS) & set(args.schedulers.split(",")) and not os.access(args.bin, os.X_OK):
        sys.exit(f"{args.bin} not found: cargo build --release --bin nova-scheduler-rs "
                 "(or set NSRS_BIN / CARGO_TARGET_DIR)")
    state = Path(os.environ.get("NSRS_STATE") or REPO / ".stack")
    out_dir = Path(args.out_dir or state / "bench")
    out_dir.mkdir(parents=True, exist_ok=True)
    venv = Path(sys.executable).parent.parent
    host_counts = [int(x) for x in args.hosts.split(",") if x]
    if (args.reuse_stack or args.measure_only) and len(host_counts) != 1:
        sys.exit("--reuse-stack takes one host count")
    mem_kb = int(next(line for line in open("/proc/meminfo") if line.startswith("MemTotal")).split()[1])
    results = {
        "started": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%SZ}",
        "command": args.command_line or shlex.join(sys.argv),
        "machine": {"nproc": os.cpu_count(), "mem_gib": round(mem_kb / 1024 / 1024, 1),
                    "kernel": platform.release(), "loadavg_start": loadavg()},
        "args": vars(args),
        "runs": [],
    }
    if args.measure_only:
        # Child of the run below: the stack is seeded; measure and hand the run back.
        n = host_counts[0]
        run = measure_cloud(args, state, venv, n)
        Path(args.measure_only).write_text(json.dumps(run, default=str))
        return
    for n in host_counts:
        if not args.reuse_stack:
            log(f"{n} hosts: fresh stack (scripts/stack.sh up)")
            t0 = time.perf_counter()
            stack(state, "up")
            up_s = time.perf_counter() - t0
            log(f"{n} hosts: seeding")
            t0 = time.perf_counter()
            summary = json.loads(stack(state, *seed_args(args, n), capture=True))
            seed_s = time.perf_counter() - t0
            log(f"{n} hosts: seeded in {seed_s:.0f}s: {summary['instances']} instances, "
                f"{summary['aggregates']} aggregates")
        else:
            up_s, seed_s, summary = None, None, {}
        # The measuring runs in a child process: `stack.sh up` for the next host
        # count recreates the RabbitMQ vhost under nova's RPC client, which it
        # does not survive cleanly.
        part = out_dir / f".run-{n}.json"
        part.unlink(missing_ok=True)
        r = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--hosts", str(n),
                            "--measure-only", str(part)])
        if r.returncode or not part.exists():
            sys.exit(f"measuring {n} hosts failed ({r.returncode})")
        run = json.loads(part.read_text())
        part.unlink()
        run.update({"stack_up_s": up_s and round(up_s, 1), "seed_s": seed_s and round(seed_s, 1),
                    "seed_summary": {k: v for k, v in summary.items()
                                     if k not in ("big", "disabled", "down")}})
        results["runs"].append(run)
        results["finished"] = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%SZ}"
        stamp = results["started"].replace(" ", "T").replace(":", "")
        (out_dir / f"results-{stamp}.json").write_text(json.dumps(results, indent=1, default=str))
    report = markdown(results)
    stamp = results["started"].replace(" ", "T").replace(":", "")
    (out_dir / f"report-{stamp}.md").write_text(report)
    print(report)
    log(f"results: {out_dir}/results-{stamp}.json, report {out_dir}/report-{stamp}.md")
    bad = sum(p["validation_problem_count"] + p["allocations_left_after_cleanup"]
              for run in results["runs"] for s in run["schedulers"] for p in s["phases"])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
