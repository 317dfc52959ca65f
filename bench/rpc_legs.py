#!/usr/bin/env python3
"""Where one select_destinations call's time goes, leg by leg, from the system
calls of nova's client and of our daemon.

The side-by-side report gives the load tool's latency and the daemon's own
`total_ms`; the difference (3.5-5 ms a call at 100 hosts) holds nova's client,
RabbitMQ both ways and our daemon's RPC path (envelope decode, dispatch, reply
encode and publish), which no log separates. This run starts the daemon with
the stack's nova.conf, makes warm-up calls, then traces this process (the
caller, nova's `SchedulerAPI`, as in bench/load.py) and the daemon with
`perf trace`, and splits each call at its wire events:

  client before send   marker write at the call's start -> the request's publish
  RabbitMQ, request    the publish -> the daemon reads it
  daemon RPC path      the daemon's read -> its reply's publish, less `total_ms`
  select_destinations  `total_ms` from the daemon's log
  RabbitMQ, reply      the reply's publish -> this process reads its body
  client after receipt the read -> marker write at the call's return

The markers are two writes to /dev/null of lengths no other write here has.
Needs `perf` and the rights to trace (root, or perf_event_paranoid <= 1). The
calls' allocations are validated and deleted afterwards, as bench/load.py does.

Usage (the stack up and seeded, e.g. by scripts/bench_side_by_side.sh):
  $NSRS_VENV/bin/python bench/rpc_legs.py --bin target/release/nova-scheduler-rs --calls 40
"""

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import load as L  # noqa: E402
import side_by_side as S  # noqa: E402

START_MARK, END_MARK = 4093, 4094
# A traced event: exit time (ms from perf's start), command, syscall, return value.
# Unfinished calls come back as `... [continued]: name()) = ret` lines.
EVENT = re.compile(r"\s*([\d.]+) \(\s*([\d.]*)\s*(?:ms)?\s*\): (\S+?)/(\d+) (.*)$")
CALL = re.compile(r"(\w+)\(fd: \d+")
RETURN = re.compile(r"\)\s+=\s*(-?\d+)")
CONTINUED = re.compile(r"\[continued\]: (\w+)\(\).*=\s*(-?\d+)")


def parse_trace(text):
    """[(exit_ms, comm, syscall, ret)] in exit order."""
    events, pending = [], {}
    for line in text.splitlines():
        m = EVENT.match(line)
        if not m:
            continue
        start, dur, comm, tid, rest = float(m[1]), m[2], m[3], m[4], m[5]
        took = float(dur) if dur else 0.0
        if "[continued]" in rest:
            c = CONTINUED.search(rest)
            if c and tid in pending:
                name = pending.pop(tid)
                events.append((start + took, comm, name, int(c[2])))
            continue
        call = CALL.match(rest)
        if not call:
            continue
        ret = RETURN.search(rest)
        if ret and dur:
            events.append((start + took, comm, call[1], int(ret[1])))
        else:
            pending[tid] = call[1]
    events.sort()
    return events


def legs(events, totals_ms, client_comm):
    """Per call: the legs named in the module's text, in ms."""
    out = []
    starts = [e for e in events if e[1] == client_comm and e[2] == "write" and e[3] == START_MARK]

    def first(after, pred):
        return next((e for e in events if e[0] > after and pred(e)), None)

    for k, start in enumerate(starts):
        publish = first(start[0], lambda e: e[1] == client_comm and e[2] == "sendto" and e[3] >= 1000)
        if publish is None:
            break
        received = first(publish[0], lambda e: e[1].startswith("lapin") and e[2] == "recvfrom" and e[3] >= 1000)
        if received is None:
            break
        replied = first(received[0], lambda e: e[1].startswith("lapin") and e[2] == "sendto" and e[3] >= 1000)
        if replied is None:
            break
        read = first(replied[0], lambda e: e[1] == client_comm and e[2] == "recvfrom" and e[3] >= 1000)
        end = first(start[0], lambda e: e[1] == client_comm and e[2] == "write" and e[3] == END_MARK)
        if read is None or end is None or k >= len(totals_ms):
            break
        daemon = replied[0] - received[0]
        out.append({
            "client before send": publish[0] - start[0],
            "RabbitMQ, request": received[0] - publish[0],
            "daemon RPC path": daemon - totals_ms[k],
            "select_destinations": totals_ms[k],
            "RabbitMQ, reply": read[0] - replied[0],
            "client after receipt": end[0] - read[0],
            "traced call": end[0] - start[0],
        })
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="the nova-scheduler-rs binary")
    ap.add_argument("--state-dir", default=str(L.REPO / ".stack"))
    ap.add_argument("--calls", type=int, default=40, help="traced sequential 1-instance calls")
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    perf = shutil.which("perf")
    if perf is None:
        sys.exit("rpc_legs: `perf` is not installed (Debian: linux-perf)")
    state = Path(args.state_dir)
    load = L.Load(state)
    conf = state / "nova.conf"
    transport_url = load.conf["DEFAULT"]["transport_url"]
    env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info"))
    logpath = state / "logs" / "rpc-legs-daemon.log"
    S.wait_consumers(transport_url, False, 30)
    daemon = S.Scheduler("ours", [[args.bin, "--config-file", str(conf)]], [logpath], env)
    daemon.start()
    trace_path = state / "bench" / "rpc-legs-trace.txt"
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    answers, latencies = [], []
    try:
        S.wait_consumers(transport_url, True, 60, daemon)
        for _ in range(args.warmup):
            answers.append(load.call(1))
        done_before = logpath.read_text().count("select_destinations done")
        devnull = os.open(os.devnull, os.O_WRONLY)
        select = load.api.select_destinations

        def marked(*a, **kw):
            os.write(devnull, b"s" * START_MARK)
            try:
                return select(*a, **kw)
            finally:
                os.write(devnull, b"e" * END_MARK)

        load.api.select_destinations = marked
        tracer = subprocess.Popen(
            [perf, "trace", "-p", f"{os.getpid()},{daemon.procs[0].pid}", "-e", "sendto,recvfrom,write",
             "-o", str(trace_path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.5)  # perf attaches to every thread of both processes
        if tracer.poll() is not None:
            sys.exit(f"rpc_legs: perf trace failed: {tracer.stderr.read().decode().strip()}")
        for _ in range(args.calls):
            a = load.call(1)
            answers.append(a)
            latencies.append(a[0] * 1000)
        time.sleep(0.3)
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=30)
        load.api.select_destinations = select
        os.close(devnull)
    finally:
        daemon.stop()
        problems, _, _ = load.validate(answers)
        left = load.cleanup(answers)
    text = logpath.read_text()
    totals = [float(v) for v in re.findall(r"select_destinations done.*?total_ms=([\d.]+)", text)][done_before:]
    client_comm = Path("/proc/self/comm").read_text().strip()
    per_call = legs(parse_trace(trace_path.read_text()), totals, client_comm)
    if not per_call:
        sys.exit(f"rpc_legs: no call could be followed through {trace_path}")
    print(f"{len(per_call)} of {args.calls} calls followed; load latency p50 "
          f"{statistics.median(latencies):.2f} ms (traced, so slower than untraced)")
    for name in per_call[0]:
        values = sorted(c[name] for c in per_call)
        print(f"  {name:<22} median {statistics.median(values):7.3f} ms   "
              f"p10 {values[len(values) // 10]:7.3f}   p90 {values[9 * len(values) // 10]:7.3f}")
    print(f"invalid answers {len(problems)}, allocations left {len(left)}; trace {trace_path}")


if __name__ == "__main__":
    main()
