#!/usr/bin/env python3
"""The shadow beside the real nova-scheduler 34 under load: what it sees, how fast
it decides, how often it agrees, and what it costs the scheduler that answers.

On the stack as it is (bring it up and seed it first, e.g.
`scripts/stack.sh up && scripts/stack.sh seed --hosts 1000 --cells 2`), it starts
nova-scheduler from the venv, then runs the same sequential phase three times
(bench/load.py's calls, through nova's own client, allocations deleted after each):

  1. nova alone;
  2. nova with two shadows beside it: one with the stack's nova.conf, one with a
     changed option (--changed, default ram_weight_multiplier = -1.0); both with the
     provider index (`[placement_database] connection`) unless --no-index;
  3. nova alone again (1 and 3 are pooled: the stack drifts over minutes).

It reports nova's p50 without and with the shadows, each shadow's calls seen
against the calls made, its decision lag (copy received to decided: p50, p99,
max), its instances by result, the share of the changed shadow's differences
put down to the changed weigher, and each shadow's Placement requests by method
(GETs only: a shadow writes nothing).

Usage (the stack's venv; see scripts/bench_shadow.sh):
  python bench/shadow.py --state-dir .stack --bin target/release/nova-scheduler-rs --calls 1000
"""

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import load as L  # noqa: E402
import nsrs_helpers as H  # noqa: E402  (load.py put tests/conformance on the path)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


class Proc:
    def __init__(self, name, cmd, log_path, env=None):
        self.name = name
        self.logf = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env or dict(os.environ),
                                     start_new_session=True)

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.logf.close()


def index_overlay(state):
    """`[placement_database] connection`: the shadow answers the candidates questions
    from its provider index (the database Placement itself uses)."""
    import configparser
    pconf = configparser.ConfigParser(interpolation=None)
    pconf.read(state / "placement" / "placement.conf")
    return f"[placement_database]\nconnection = {pconf['placement_database']['connection']}\n"


def start_shadow(args, state, name, overlay):
    port = free_port()
    if not args.no_index:
        overlay = index_overlay(state) + overlay
    conf = state / f"bench-shadow-{name}.conf"
    conf.write_text(f"[DEFAULT]\nhost = bench-shadow-{name}\n"
                    f"[nova_scheduler_rs]\nhttp_listen = 127.0.0.1:{port}\n"
                    f"state_dir = {state / ('bench-shadow-' + name)}\n" + overlay)
    p = Proc(f"shadow-{name}", [args.bin, "--config-file", str(state / "nova.conf"),
                                "--config-file", str(conf), "shadow", "--settle", "30"],
             state / "logs" / f"bench-shadow-{name}.log", dict(os.environ, RUST_LOG="info"))
    p.url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while True:
        try:
            if get(p.url + "/readyz", 2):
                break
        except OSError:
            pass
        if p.proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"shadow {name} did not become ready; log {p.logf.name}")
        time.sleep(0.5)
    return p


def report(p):
    return json.loads(get(p.url + "/shadow"))


def placement_methods(p):
    out = {}
    for line in get(p.url + "/metrics").splitlines():
        m = re.match(r'nova_scheduler_placement_requests_total\{method="([A-Z]+)".* (\d+)$', line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0) + int(m.group(2))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state-dir", default=str(L.REPO / ".stack"))
    ap.add_argument("--bin", required=True)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--changed", default="[filter_scheduler]\nram_weight_multiplier = -1.0\n",
                    help="the changed shadow's nova.conf overlay")
    ap.add_argument("--changed-weigher", default="RAMWeigher")
    ap.add_argument("--no-index", action="store_true",
                    help="the shadows ask Placement's API for candidates (no provider index)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    state = Path(args.state_dir)
    load = L.Load(state)
    transport_url = load.conf["DEFAULT"]["transport_url"]
    if H.queue_consumers(transport_url):
        sys.exit("something already consumes the scheduler queue: stop it first")
    venv = Path(sys.executable).parent.parent
    nova = Proc("nova-scheduler", [str(venv / "bin" / "nova-scheduler"), "--config-file",
                                   str(state / "nova.conf")], state / "logs" / "bench-shadow-nova.log")
    shadows = []
    try:
        deadline = time.monotonic() + 120
        while not H.queue_consumers(transport_url):
            if time.monotonic() > deadline:
                sys.exit("nova-scheduler did not consume the scheduler queue")
            time.sleep(0.5)
        log("nova-scheduler consumes; warm-up")
        load.run_phase("warmup", 1, 5, 1)
        log(f"phase 1: nova alone, {args.calls} calls")
        alone1 = load.run_phase("alone", 1, args.calls, 1)
        log("starting the shadows")
        shadows = [start_shadow(args, state, "same", ""),
                   start_shadow(args, state, "changed", args.changed)]
        log(f"phase 2: nova with the shadows, {args.calls} calls")
        beside = load.run_phase("beside", 1, args.calls, 1)
        deadline = time.monotonic() + 120
        while any(report(s)["pending"] for s in shadows) and time.monotonic() < deadline:
            time.sleep(1)
        reports = {s.name: report(s) for s in shadows}
        methods = {s.name: placement_methods(s) for s in shadows}
        for s in shadows:
            s.stop()
        shadows = []
        log(f"phase 3: nova alone again, {args.calls} calls")
        alone2 = load.run_phase("alone", 1, args.calls, 1)
    finally:
        for s in shadows:
            s.stop()
        nova.stop()
    p50_alone = statistics.median(alone1["latencies_ms"] + alone2["latencies_ms"])
    p50_beside = statistics.median(beside["latencies_ms"])
    changed = reports["shadow-changed"]
    differ = changed["instances"]["differ"]
    named = sum(d["instances"] for d in changed["differences"]
                if d["step"] == f"weigher:{args.changed_weigher}")
    out = {
        "calls": args.calls, "hosts": len(load.hosts),
        "nova_p50_ms_alone": round(p50_alone, 1), "nova_p50_ms_beside_shadows": round(p50_beside, 1),
        "nova_p50_change": round(p50_beside / p50_alone - 1, 4),
        "shadows": reports, "placement_requests_by_method": methods,
        "changed_differ": differ, "changed_named_weigher": named,
    }
    same = reports["shadow-same"]
    print(f"hosts {out['hosts']}, {args.calls} calls per phase")
    print(f"nova-scheduler p50: alone {p50_alone:.1f} ms, beside two shadows {p50_beside:.1f} ms "
          f"({out['nova_p50_change']:+.1%})")
    for name, r in reports.items():
        i, lag = r["instances"], r["decision_lag_ms"]
        print(f"{name}: saw {r['calls']}/{args.calls} calls; lag p50 {lag['p50']:.1f} ms, "
              f"p99 {lag['p99']:.1f} ms, max {lag['max']:.1f} ms; agree {i['agree']}, tie {i['tie']}, "
              f"differ {i['differ']}, unknown {i['unknown']}; Placement {methods[name]}")
    print(f"changed shadow: {named}/{differ} differences named {args.changed_weigher} first "
          f"({named / differ:.1%})" if differ else "changed shadow: no difference")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
