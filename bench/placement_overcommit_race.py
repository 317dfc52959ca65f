#!/usr/bin/env python3
"""Does Placement itself let concurrent claims overcommit a provider?

No scheduler involved: on the seeded cloud of `scripts/stack.sh` (stack up), each
round sends `--callers` concurrent `PUT /allocations/{new consumer}` (nova's claim,
microversion 1.36) to one provider, each for a MEMORY_MB amount of which exactly
`--fit` fit in what the provider has free; then it reads the provider's usage, and
deletes the round's allocations. A round whose usage ends above
`(total - reserved) * allocation_ratio` is an overcommit Placement accepted.

Why it can happen (openstack-placement 16.0.0, MariaDB's default REPEATABLE READ):
the handler of `PUT /allocations/{consumer}` runs `replace_all` inside one outer
database transaction. When the provider's generation moved under it, `replace_all`
retries (`[placement] allocation_conflict_retry_count`, default 10) after reading
the provider again in a separate transaction, so the generation check passes, but
the capacity check of the retry reads usage in the outer transaction, whose
snapshot predates the concurrent claim that moved the generation.

Usage: $NSRS_VENV/bin/python bench/placement_overcommit_race.py [--rounds 40]
"""

import argparse
import concurrent.futures
import json
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "conformance"))

import nsrs_helpers as H  # noqa: E402
import requests  # noqa: E402

CLAIM_AGENT = "nsrs-overcommit-race"


def memory(placement, rp):
    inv = placement.get(f"/resource_providers/{rp}/inventories")["inventories"]["MEMORY_MB"]
    used = placement.get(f"/resource_providers/{rp}/usages")["usages"].get("MEMORY_MB", 0)
    return (inv["total"] - inv["reserved"]) * inv["allocation_ratio"], used, inv["step_size"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--state", default=str(REPO / ".stack"))
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--callers", type=int, default=8, help="concurrent claims per round")
    ap.add_argument("--fit", type=int, default=3, help="how many of them the provider can hold")
    args = ap.parse_args()
    if not 1 <= args.fit < args.callers:
        sys.exit("--fit must be at least 1 and fewer than --callers")

    state = Path(args.state)
    conf = H.read_conf(state / "nova.conf")
    placement = H.Placement(conf)
    cloud = json.loads((state / "cloud.json").read_text())
    live = [h for h in cloud["hosts"] if not h["disabled"] and not h["down"]]
    if not live:
        sys.exit(f"no live enabled host in {state / 'cloud.json'}")
    def free(host):
        capacity, used, _ = memory(placement, host["uuid"])
        return capacity - used

    # The provider with the most free memory, so the claims are large and few.
    best = max(live, key=free)
    rp = best["uuid"]
    capacity, used_before, step = memory(placement, rp)
    amount = int((capacity - used_before) // args.fit) // step * step
    if amount < step or (capacity - used_before) // amount != args.fit:
        sys.exit(f"{best['name']}: {capacity - used_before} MB free cannot be split into {args.fit} claims")
    print(f"{best['name']} ({rp}): capacity {capacity:.0f} MB, used {used_before} MB; "
          f"{args.callers} concurrent claims of {amount} MB per round, {args.fit} fit")

    def claim(consumer):
        with requests.Session() as s:
            r = s.put(f"{placement.url}/allocations/{consumer}", timeout=60, json={
                "allocations": {rp: {"resources": {"MEMORY_MB": amount}}},
                "project_id": H.PROJECT_ID, "user_id": H.USER_ID, "consumer_generation": None,
            }, headers={"X-Auth-Token": placement.s.headers["X-Auth-Token"],
                        "OpenStack-API-Version": "placement 1.36", "User-Agent": CLAIM_AGENT})
            return r.status_code

    overcommitted = 0
    with concurrent.futures.ThreadPoolExecutor(args.callers) as pool:
        for n in range(args.rounds):
            consumers = [str(uuid.uuid4()) for _ in range(args.callers)]
            codes = list(pool.map(claim, consumers))
            _, used, _ = memory(placement, rp)
            over = used > capacity
            overcommitted += over
            print(f"round {n + 1}: {codes.count(204)} accepted, {codes.count(409)} refused"
                  f"{', other ' + str(sorted(c for c in codes if c not in (204, 409))) if len(set(codes) - {204, 409}) else ''}"
                  f"; used {used} MB{'  OVERCOMMITTED' if over else ''}")
            for c in consumers:
                placement.delete_allocations(c)
            if memory(placement, rp)[1] != used_before:
                sys.exit("the round's allocations did not all go; stopping")
    print(f"{overcommitted} of {args.rounds} rounds overcommitted {best['name']}")


if __name__ == "__main__":
    main()
