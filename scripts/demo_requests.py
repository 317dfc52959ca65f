#!/usr/bin/env python3
"""Send a few select_destinations calls through nova's own RPC client
(nova.scheduler.rpcapi.SchedulerAPI, as nova-conductor does) to whatever
scheduler consumes the stack's 'scheduler' queue, and print the chosen hosts.
Allocations made by the demo are deleted afterwards, so it can be run again.

Run with the stack's venv: $NSRS_VENV/bin/python scripts/demo_requests.py
"""

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "conformance"))

import nsrs_helpers as H  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config-file", default=str(H.NOVA_CONF))
    args = ap.parse_args()

    transport_url = H.read_conf(args.config_file)["DEFAULT"]["transport_url"]
    deadline = time.monotonic() + 60
    while H.queue_consumers(transport_url) == 0:
        if time.monotonic() > deadline:
            sys.exit("nothing consumes the 'scheduler' queue: is the scheduler running?")
        time.sleep(0.5)

    conf = H.init_nova_client(args.config_file)
    conf.set_override("long_rpc_timeout", 120)
    from nova import exception
    from nova.scheduler import rpcapi

    api = rpcapi.SchedulerAPI()
    ctxt = H.user_context()
    placement = H.Placement(H.read_conf(args.config_file))
    seeded = H.CloudDB(H.read_conf(args.config_file)).host_states()
    cell_names = {h["cell_uuid"]: h["cell"] for h in seeded.values()}

    requests_ = [
        ("1 x m1.small (1 vCPU, 2 GiB, 20 GB)", H.make_flavor(1, 2048, 20), 1),
        ("3 x m1.medium (2 vCPU, 4 GiB, 40 GB)", H.make_flavor(2, 4096, 40), 3),
        ("2 x big (8 vCPU, 300 GiB, 100 GB): only big hosts fit", H.make_flavor(8, 300 * 1024, 100), 2),
        ("1 x impossible (100000 vCPU)", H.make_flavor(100000, 4096, 20), 1),
    ]
    for title, flavor, n in requests_:
        uuids = [H.new_uuid() for _ in range(n)]
        spec = H.make_spec(ctxt, flavor, uuids)
        t0 = time.monotonic()
        try:
            result = api.select_destinations(ctxt, spec, uuids, return_objects=True,
                                             return_alternates=True)
        except exception.NoValidHost as e:
            print(f"{title}: NoValidHost ({str(e).splitlines()[0].strip()})"
                  f" in {time.monotonic() - t0:.2f}s")
            continue
        finally:
            for u in uuids:
                placement.delete_allocations(u)
        print(f"{title}: {time.monotonic() - t0:.2f}s")
        for i, sels in enumerate(result):
            alts = ", ".join(s.service_host for s in sels[1:]) or "-"
            print(f"  instance {i}: {sels[0].service_host} in {cell_names.get(sels[0].cell_uuid)}"
                  f" (alternates: {alts})")


if __name__ == "__main__":
    main()
