#!/usr/bin/env python3
"""Load generator for a scheduler serving the stack's `scheduler` topic.

It calls select_destinations exactly as nova-conductor does: nova's own
nova.scheduler.rpcapi.SchedulerAPI, a RequestSpec built by nova's objects
(RequestSpec.from_components, as nova-api builds it), the user's context,
return_objects=True and return_alternates=True. It does not care which
scheduler answers (nova-scheduler 34 or nova-scheduler-rs).

Phases (each optional, run in this order):
  single      --single N                   N sequential calls, 1 instance each
  multi       --multi N --instances K      N sequential calls, K instances each
  concurrent  --concurrency C --per-caller N --instances K
                                           C callers (threads) at once, N calls each

For every phase it reports p50/p95/p99/max latency, throughput, NoValidHost and
other failures, claim conflicts (lines "Failed to save allocation" that both
schedulers log when a claim PUT is refused, counted in the scheduler's log if
given), and the daemon's per-phase timings when its log carries them
(`*_ms=` fields of `select_destinations done` lines).

Every answer is validated after the phase: each instance has its allocation in
Placement on exactly the chosen compute node with the flavor's resources, the
chosen node is an enabled, live host of the seeded cloud, no host appears twice
in one instance's list, and no provider the phase touched is over
(total - reserved) x allocation_ratio. Then the phase's allocations are deleted
(and checked gone) so every phase and every scheduler starts from the seeded
cloud.

Usage (the stack's venv):
  python bench/load.py --state-dir .stack --single 50 --multi 10 --instances 10 \\
      --concurrency 10 --per-caller 1 --json out.json --scheduler-log .stack/logs/x.log
"""

import argparse
import concurrent.futures
import json
import os
import re
import statistics
import sys
import threading
import time
import warnings
from pathlib import Path

os.environ.setdefault("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")
warnings.filterwarnings("ignore", category=DeprecationWarning)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "conformance"))

# nova and our daemon log this for every claim Placement refused ("Failed to save
# allocations (batch)" for our batched POST): one line per conflict.
CLAIM_CONFLICT = re.compile(r"Failed to save allocation")
PHASE_LINE = re.compile(r"select_destinations done")
MS_FIELD = re.compile(r"\b(\w+_ms)=([0-9]+(?:\.[0-9]+)?)")

# Per thread: seconds the current call has spent in nova's RPC serializer.
_OBJECT_WORK = threading.local()


def time_nova_serializer():
    """Wraps nova's RPC serializer so that each call adds up the time nova's client
    spends turning nova objects into primitives and back in the calling thread (the
    RequestSpec out, the Selections in): the client's own work for this request, which
    nova-scheduler's callers pay as well and which a trivial call (the RPC ping) does
    not do."""
    from nova import rpc
    cls = rpc.RequestContextSerializer
    if getattr(cls, "_nsrs_timed", False):
        return
    for name in ("serialize_entity", "deserialize_entity"):
        def timed(self, context, entity, _inner=getattr(cls, name)):
            t0 = time.perf_counter()
            try:
                return _inner(self, context, entity)
            finally:
                _OBJECT_WORK.seconds = getattr(_OBJECT_WORK, "seconds", 0.0) + time.perf_counter() - t0
        setattr(cls, name, timed)
    cls._nsrs_timed = True


def percentile(values, q):
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]


def summarize_latencies(lat):
    if not lat:
        return {}
    return {"p50_ms": round(statistics.median(lat) * 1000, 1),
            "p95_ms": round(percentile(lat, 95) * 1000, 1),
            "p99_ms": round(percentile(lat, 99) * 1000, 1),
            "max_ms": round(max(lat) * 1000, 1),
            "mean_ms": round(statistics.fmean(lat) * 1000, 1)}


class LogWindow:
    """The part of a log file written between start() and read(); of several files
    (one per daemon when several serve the queue), their parts one after the other."""

    def __init__(self, path):
        paths = path if isinstance(path, (list, tuple)) else [path] if path else []
        self.paths = [Path(p) for p in paths]
        self.offsets = [0] * len(self.paths)

    def start(self):
        self.offsets = [p.stat().st_size if p.exists() else 0 for p in self.paths]

    def read(self):
        parts = []
        for path, offset in zip(self.paths, self.offsets):
            if path.exists():
                with open(path, "rb") as f:
                    f.seek(offset)
                    parts.append(f.read().decode(errors="replace"))
        return "".join(parts)


def phase_timings(text):
    """Medians of the `*_ms` fields of the daemon's `select_destinations done`
    lines (nothing when the scheduler does not log them)."""
    fields = {}
    for line in text.splitlines():
        if PHASE_LINE.search(line):
            for name, value in MS_FIELD.findall(line):
                fields.setdefault(name, []).append(float(value))
    return {name: {"median": round(statistics.median(v), 2), "p95": round(percentile(v, 95), 2),
                   "n": len(v)} for name, v in sorted(fields.items())}


class Load:
    """nova's client side plus the checks; one per process."""

    # --nested: the flavor also asks for a vGPU and port bandwidth in granular groups,
    # as nova builds them from a flavor's extra specs (seed_cloud.py --nested has the
    # devices, bridges and shared disk pools).
    NESTED_EXTRA_SPECS = {
        "resources1:VGPU": "1",
        "resources2:NET_BW_EGR_KILOBIT_PER_SEC": "1000",
        "resources2:NET_BW_IGR_KILOBIT_PER_SEC": "1000",
        "trait2:CUSTOM_PHYSNET_PUBLIC": "required",
        "trait2:CUSTOM_VNIC_TYPE_NORMAL": "required",
        "group_policy": "none",
    }
    NESTED_RESOURCES = {"VGPU": 1, "NET_BW_EGR_KILOBIT_PER_SEC": 1000,
                        "NET_BW_IGR_KILOBIT_PER_SEC": 1000}

    def __init__(self, state_dir, flavor=(2, 4096, 20), nested=False):
        import nsrs_helpers as H
        self.H = H
        self.state_dir = Path(state_dir)
        conf_path = self.state_dir / "nova.conf"
        self.CONF = H.init_nova_client(conf_path)
        self.CONF.set_override("long_rpc_timeout", 600)
        import nova.context
        from nova.scheduler import rpcapi
        time_nova_serializer()
        self.api = rpcapi.SchedulerAPI()
        self.ctxt = H.user_context()
        self.admin = nova.context.get_admin_context()
        self.conf = H.read_conf(conf_path)
        self._local = threading.local()
        vcpus, mem, disk = flavor
        self.flavor = H.make_flavor(vcpus=vcpus, memory_mb=mem, root_gb=disk, name="bench.flavor")
        self.want = H.flavor_resources(self.flavor)
        self.nested = nested
        if nested:
            self.flavor.extra_specs.update(self.NESTED_EXTRA_SPECS)
            self.want = dict(self.want, **self.NESTED_RESOURCES)
        self.pool = concurrent.futures.ThreadPoolExecutor(8)
        self.reload_cloud()

    def reload_cloud(self):
        """The seeded cloud's hosts (after a new seed)."""
        cloud = json.loads((self.state_dir / "cloud.json").read_text())
        self.hosts = {h["uuid"]: h for h in cloud["hosts"]}
        self.eligible = {u for u, h in self.hosts.items() if not h["disabled"] and not h["down"]}
        # The providers an instance on a host may hold: its tree and its disk pool.
        self.providers_of = {
            u: {u, *(c["uuid"] for c in h.get("children", [])), *([h["pool"]] if h.get("pool") else [])}
            for u, h in self.hosts.items()}

    @property
    def placement(self):
        # requests.Session is not thread-safe: one per thread.
        p = getattr(self._local, "placement", None)
        if p is None:
            p = self._local.placement = self.H.Placement(self.conf)
        return p

    # --- one call -------------------------------------------------------------

    def call(self, n_instances):
        """One select_destinations as nova-conductor makes it. Returns
        (seconds, uuids, result or None, error class name or None, seconds of it
        spent in nova's serializer)."""
        uuids = [self.H.new_uuid() for _ in range(n_instances)]
        # A context per call, as each API request has its own request_id.
        ctxt = self.H.user_context()
        spec = self.H.make_spec(ctxt, self.flavor, uuids)
        _OBJECT_WORK.seconds = 0.0
        t0 = time.perf_counter()
        try:
            result = self.api.select_destinations(ctxt, spec, uuids,
                                                  return_objects=True, return_alternates=True)
            return time.perf_counter() - t0, uuids, result, None, _OBJECT_WORK.seconds
        except Exception as e:  # noqa: BLE001 - every failure is counted by class
            return time.perf_counter() - t0, uuids, None, type(e).__name__, _OBJECT_WORK.seconds

    # --- checks and cleanup ----------------------------------------------------

    def validate(self, answers):
        """Problems found in the answers (a list of strings, those of providers over
        capacity included), the providers chosen, and how many providers are over
        capacity (what concurrent schedulers must never cause)."""
        problems, chosen = [], set()
        checks = []
        for _, uuids, result, err, _ in answers:
            if result is None:
                continue
            if not isinstance(result, list) or len(result) != len(uuids):
                problems.append(f"{len(uuids)} instances asked, answer has "
                                f"{len(result) if isinstance(result, list) else type(result)} lists")
                continue
            for inst, sels in zip(uuids, result):
                hosts = [s.compute_node_uuid for s in sels]
                if len(set(hosts)) != len(hosts):
                    problems.append(f"{inst}: a host appears twice in its selection list")
                for u in hosts:
                    if u not in self.eligible:
                        problems.append(f"{inst}: {u} is not an enabled, live seeded host")
                chosen.add(sels[0].compute_node_uuid)
                checks.append((inst, sels[0].compute_node_uuid))

        def check_alloc(pair):
            inst, node = pair
            got = self.placement.allocations(inst)["allocations"]
            if node not in got or not set(got) <= self.providers_of[node]:
                return f"{inst}: allocations on {sorted(got)}, chosen {node}"
            total = {}
            for a in got.values():
                for rc, n in a["resources"].items():
                    total[rc] = total.get(rc, 0) + n
            if total != self.want:
                return f"{inst}: allocated {total}, flavor needs {self.want}"
            return None

        problems += [p for p in self.pool.map(check_alloc, checks) if p]
        touched = sorted({rp for node in chosen for rp in self.providers_of[node]})
        over = [p for p in self.pool.map(self.over_capacity, touched) if p]
        return problems + over, chosen, len(over)

    def over_capacity(self, rp):
        inv = self.placement.get(f"/resource_providers/{rp}/inventories")["inventories"]
        usages = self.placement.get(f"/resource_providers/{rp}/usages")["usages"]
        for rc, used in usages.items():
            i = inv[rc]
            cap = (i["total"] - i["reserved"]) * i["allocation_ratio"]
            if used > cap + 1e-9:
                name = self.hosts.get(rp, {}).get("name", rp)
                return f"{name}: {rc} used {used} > capacity {cap}"
        return None

    def cleanup(self, answers):
        """Delete every allocation the answers' instances hold (claims of failed
        calls included, should a scheduler leave any) and check they are gone."""
        uuids = [u for _, us, *_ in answers for u in us]

        def drop(u):
            self.placement.delete_allocations(u)
            return self.placement.allocations(u)["allocations"]

        left = [u for u, rest in zip(uuids, self.pool.map(drop, uuids)) if rest]
        return left

    # --- phases ----------------------------------------------------------------

    def run_phase(self, name, callers, per_caller, n_instances, log=None, interval=0.0,
                  paired=None):
        """`interval` (seconds): a caller starts its calls that far apart (at once
        when the previous call took longer), so that Placement sees the same
        arrival rate whichever scheduler is measured; 0 = back to back.
        `paired(n_instances)`, in a sequential phase: Placement writes the claims of
        a call alone right after each call (bench/placement_floor.py's
        `PairedClaims.write`), seconds or None; its time is kept out of the phase's
        wall time."""
        window = LogWindow(log)
        window.start()
        answers = []
        paired_s, paired_spent = [], []
        lock = threading.Lock()
        pairing = paired if callers == 1 else None

        def caller():
            start = time.perf_counter()
            for k in range(per_caller):
                if interval:
                    time.sleep(max(0.0, start + k * interval - time.perf_counter()))
                a = self.call(n_instances)
                with lock:
                    answers.append(a)
                if pairing:
                    t0 = time.perf_counter()
                    paired_s.append(pairing(n_instances))
                    paired_spent.append(time.perf_counter() - t0)
                    start += paired_spent[-1]

        t0 = time.perf_counter()
        if callers == 1:
            caller()
        else:
            threads = [threading.Thread(target=caller) for _ in range(callers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        wall = time.perf_counter() - t0
        wall -= sum(paired_spent)
        time.sleep(0.3)  # let the scheduler flush its last log lines
        text = window.read()
        problems, chosen, over_capacity = self.validate(answers)
        left = self.cleanup(answers)
        ok = [a for a in answers if a[3] is None]
        errors = {}
        for a in answers:
            if a[3] is not None:
                errors[a[3]] = errors.get(a[3], 0) + 1
        out = {
            "phase": name, "callers": callers, "calls": len(answers), "instances_per_call": n_instances,
            "ok": len(ok), "no_valid_host": sum(n for e, n in errors.items() if e.startswith("NoValidHost")),
            "errors": errors, "wall_s": round(wall, 3), "interval_ms": round(interval * 1000, 1),
            "calls_per_s": round(len(answers) / wall, 3) if wall else None,
            "instances_per_s": round(len(ok) * n_instances / wall, 3) if wall else None,
            **summarize_latencies([a[0] for a in answers]),
            "ok_latency": summarize_latencies([a[0] for a in ok]),
            # Every call's latency, so that runs can be pooled (side_by_side.py --rounds).
            "latencies_ms": [round(a[0] * 1000, 2) for a in answers],
            # nova's client turning the RequestSpec and the Selections to and from
            # primitives, per call (see time_nova_serializer).
            "client_objects_ms": [round(a[4] * 1000, 3) for a in answers],
            # Placement writing the same claims alone right after each call (`paired`).
            "paired_claim_ms": [round(t * 1000, 2) for t in paired_s if t is not None],
            "paired_claim_refused": sum(1 for t in paired_s if t is None),
            "claim_conflicts": len(CLAIM_CONFLICT.findall(text)) if log else None,
            "daemon_phases": phase_timings(text),
            "distinct_hosts_chosen": len(chosen),
            "validation_problems": problems[:20], "validation_problem_count": len(problems),
            "over_capacity": over_capacity,
            "allocations_left_after_cleanup": len(left),
        }
        return out


def print_phase(r, out=sys.stdout):
    print(f"  {r['phase']:<11} calls={r['calls']} x{r['instances_per_call']} callers={r['callers']} "
          f"ok={r['ok']} NoValidHost={r['no_valid_host']} errors={r['errors'] or 0} "
          f"p50={r.get('p50_ms')}ms p95={r.get('p95_ms')}ms p99={r.get('p99_ms')}ms "
          f"max={r.get('max_ms')}ms {r['calls_per_s']} calls/s "
          f"conflicts={r['claim_conflicts']} invalid={r['validation_problem_count']}", file=out)
    for p in r["validation_problems"][:5]:
        print(f"    INVALID: {p}", file=out)
    if r["daemon_phases"]:
        print("    daemon: " + " ".join(f"{k}={v['median']}" for k, v in r["daemon_phases"].items()),
              file=out)


def add_load_args(ap):
    ap.add_argument("--single", type=int, default=0, help="sequential 1-instance calls")
    ap.add_argument("--multi", type=int, default=0, help="sequential multi-instance calls")
    ap.add_argument("--instances", type=int, default=10, help="instances per multi/concurrent call")
    ap.add_argument("--concurrency", type=int, default=0, help="concurrent callers")
    ap.add_argument("--per-caller", type=int, default=1, help="calls per concurrent caller")
    ap.add_argument("--flavor", default="2,4096,20", help="vcpus,memory_mb,root_gb")
    ap.add_argument("--interval-ms", type=float, default=0,
                    help="sequential phases start a call this often (at once when the previous "
                         "one took longer): the same arrival rate at Placement for every scheduler; "
                         "0 = back to back")


def run_phases(load, args, log=None, report=print_phase, paired=None):
    """The phases `args` asks for; `paired`: see `Load.run_phase` (sequential phases)."""
    results = []
    if args.single:
        results.append(load.run_phase("single", 1, args.single, 1, log, args.interval_ms / 1000,
                                      paired))
        report(results[-1])
    if args.multi:
        results.append(load.run_phase("multi", 1, args.multi, args.instances, log,
                                      args.interval_ms / 1000, paired))
        report(results[-1])
    if args.concurrency:
        results.append(load.run_phase("concurrent", args.concurrency, args.per_caller,
                                      args.instances, log))
        report(results[-1])
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--state-dir", default=str(REPO / ".stack"))
    ap.add_argument("--scheduler-log", action="append",
                    help="the scheduler's log, for conflicts and phase timings (repeat it for "
                         "several daemons serving the queue)")
    ap.add_argument("--json", help="write the results here")
    add_load_args(ap)
    ap.add_argument("--nested", action="store_true",
                    help="the cloud was seeded with --nested: the flavor also asks for a vGPU "
                         "and bandwidth in granular groups")
    args = ap.parse_args()
    load = Load(args.state_dir, tuple(int(x) for x in args.flavor.split(",")), nested=args.nested)
    results = run_phases(load, args, args.scheduler_log)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    bad = sum(r["validation_problem_count"] + r["allocations_left_after_cleanup"] for r in results)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
