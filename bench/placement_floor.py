#!/usr/bin/env python3
"""What Placement alone needs to record the claims of a benchmark phase.

Any scheduler that claims through Placement (nova's, ours with or without the fast
path) pays at least this: the time Placement takes to write the allocations, with
no scheduling at all. Run on the seeded cloud of `scripts/bench_side_by_side.sh`
(stack up), it claims the flavor on distinct providers that have room (found with
nova's own candidates query), the way each scheduler claims, and frees everything
afterwards:

- `put-1`: one instance, nova's `PUT /allocations/{consumer}` (sequential);
- `post-1`: one instance, one `POST /allocations` (our batched path, sequential);
- `post-10`: ten instances in one `POST /allocations` (a 10-instance request);
- `burst-put`: 10 concurrent callers, each 10 sequential PUTs (nova's burst);
- `burst-post`: 10 concurrent callers, each one POST of 10 consumers (our burst);
- `post-100`: 100 instances in one POST (the most any grouping of the default
  burst's claims could save).

The bursts' shape is `--burst C,N,K`: C callers at once, each N calls of K instances
(default 10,1,10), the shape of a concurrent benchmark phase.

Usage: $NSRS_VENV/bin/python bench/placement_floor.py [--state .stack] [--repeat 5]
(bench/side_by_side.py measures `post-1`, `put-1` and `post-10` on each cloud with
`measure`, and `burst-post` in the shape of its concurrent phase.)

`PairedClaims` writes one call's claims the same way right after each call of a
sequential phase (bench/load.py's `run_phase(paired=...)`): Placement's time for a
write drifts by a quarter or more within minutes on a small VM, so the floor a call
is held to is measured in the conditions that call saw.
"""

import argparse
import concurrent.futures
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "conformance"))

import nsrs_helpers as H  # noqa: E402


def roomy_providers(p, want):
    """Placement's providers for nova 34's question for the flavor (no limit), and
    those with room for one more instance: each claim gets its own provider, so no
    claim waits on another's generation (the schedulers spread too)."""
    body = p.get("/allocation_candidates",
                 resources=",".join(f"{rc}:{n}" for rc, n in sorted(want.items())),
                 root_required="OWNER_NOVA,!COMPUTE_STATUS_DISABLED")
    summaries = {rp: s["resources"] for rp, s in body["provider_summaries"].items()}
    roomy = [rp for rp, res in summaries.items()
             if all(res[rc]["capacity"] - res[rc]["used"] >= n for rc, n in want.items())]
    return summaries, roomy


def put_claim(p, want, project, user, rp):
    """nova's claim: one `PUT /allocations/{consumer}` for a new consumer."""
    c = str(uuid.uuid4())
    r = p.s.put(f"{p.url}/allocations/{c}", timeout=60, json={
        "allocations": {rp: {"resources": want}}, "project_id": project,
        "user_id": user, "consumer_generation": None})
    r.raise_for_status()
    return [c]


def post_claims(p, want, project, user, rps):
    """The batched claim: one `POST /allocations` of a new consumer per provider."""
    consumers = {str(uuid.uuid4()): rp for rp in rps}
    body = {c: {"allocations": {rp: {"resources": want}}, "project_id": project,
                "user_id": user, "consumer_generation": None}
            for c, rp in consumers.items()}
    r = p.s.post(f"{p.url}/allocations", timeout=60, json=body)
    r.raise_for_status()
    return list(consumers)


class PairedClaims:
    """One call's claims written by Placement alone, right after the call (see the
    module docs): `write(k)` claims the flavor for `k` new consumers on `k` distinct
    providers that had room when it started (one `POST`, or `k` sequential `PUT`s
    with `put=True`), returns the seconds that took, and frees them again, untimed.
    None when Placement refused (a provider filled up meanwhile)."""

    def __init__(self, conf, want, put=False):
        self.p = H.Placement(conf)
        self.want, self.put = want, put
        self.project, self.user = uuid.uuid4().hex, uuid.uuid4().hex
        _, self.roomy = roomy_providers(self.p, want)
        self.next = 0

    def write(self, k):
        if len(self.roomy) < k:
            return None
        # Rotated, so that no provider fills up with the calls' own claims beside.
        rps = [self.roomy[(self.next + i) % len(self.roomy)] for i in range(k)]
        self.next = (self.next + k) % len(self.roomy)
        t0 = time.perf_counter()
        try:
            if self.put:
                consumers = [c for rp in rps for c in put_claim(self.p, self.want, self.project,
                                                                 self.user, rp)]
            else:
                consumers = post_claims(self.p, self.want, self.project, self.user, rps)
        except Exception:  # noqa: BLE001 - a refused write is no floor sample
            return None
        wall = time.perf_counter() - t0
        for c in consumers:
            self.p.delete_allocations(c)
        return wall


def measure(conf, want, repeat=5, shapes=None, log=print, burst=(10, 1, 10)):
    """Median and minimum wall time of each claim shape (all of them, or `shapes`),
    on the seeded cloud `conf` describes; everything claimed is freed again. The
    bursts are `burst` = (callers, calls per caller, instances per call)."""
    callers, calls, instances = burst
    burst_instances = callers * calls * instances
    project, user = uuid.uuid4().hex, uuid.uuid4().hex
    main_p = H.Placement(conf)
    summaries, roomy = roomy_providers(main_p, want)
    wanted = set(shapes or ("post-10", "burst-put", "post-100"))
    needed = max(10 if "post-10" in wanted else 1,
                 burst_instances if {"burst-put", "burst-post"} & wanted else 1,
                 100 if "post-100" in wanted else 1)
    if len(roomy) < needed:
        raise RuntimeError(f"only {len(roomy)} providers have room for the flavor; need {needed}")
    sessions = [H.Placement(conf) for _ in range(callers)]

    def put(p, rp):
        return put_claim(p, want, project, user, rp)

    def post(p, rps):
        return post_claims(p, want, project, user, rps)

    def free(consumers):
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda c: main_p.delete_allocations(c), consumers))

    def timed(shape):
        t0 = time.perf_counter()
        consumers = shape()
        wall = time.perf_counter() - t0
        free(consumers)
        return wall

    def burst_run(per_caller):
        def run():
            with concurrent.futures.ThreadPoolExecutor(callers) as pool:
                parts = pool.map(per_caller, range(callers))
                return [c for part in parts for c in part]
        return run

    def mine(k):
        """Caller k's providers: its own, so no claim of the burst waits on another's."""
        return roomy[k * calls * instances:(k + 1) * calls * instances]

    all_shapes = {
        "put-1": lambda: put(main_p, roomy[0]),
        "post-1": lambda: post(main_p, roomy[:1]),
        "post-10": lambda: post(main_p, roomy[:10]),
        "burst-put": burst_run(lambda k: [c for rp in mine(k) for c in put(sessions[k], rp)]),
        "burst-post": burst_run(lambda k: [c for i in range(calls) for c in post(
            sessions[k], mine(k)[i * instances:(i + 1) * instances])]),
        "post-100": lambda: post(main_p, roomy[:100]),
    }
    timed(all_shapes["post-1"])  # warm the connection and Placement's workers
    out = {}
    for name in shapes or all_shapes:
        walls = [timed(all_shapes[name]) for _ in range(repeat)]
        out[name] = {"median_ms": round(1000 * statistics.median(walls), 1),
                     "min_ms": round(1000 * min(walls), 1), "runs": len(walls)}
        log(f"{name:11s} median {out[name]['median_ms']:8.1f} ms  min {out[name]['min_ms']:8.1f} ms")
    return {"providers": len(summaries), "flavor": want, "burst": list(burst), "shapes": out}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--state", default=str(REPO / ".stack"))
    ap.add_argument("--repeat", type=int, default=5, help="runs of each shape (median reported)")
    ap.add_argument("--flavor", default="2,4096,20", help="vcpus,memory_mb,root_gb")
    ap.add_argument("--burst", default="10,1,10",
                    help="callers,calls per caller,instances per call of the burst shapes")
    args = ap.parse_args()

    conf = H.read_conf(Path(args.state) / "nova.conf")
    vcpus, mem, disk = (int(x) for x in args.flavor.split(","))
    want = {"VCPU": vcpus, "MEMORY_MB": mem, "DISK_GB": disk}
    try:
        found = measure(conf, want, args.repeat, log=lambda m: print(m, flush=True),
                        burst=tuple(int(x) for x in args.burst.split(",")))
    except RuntimeError as e:
        sys.exit(str(e))
    print(json.dumps(found))


if __name__ == "__main__":
    main()
