# SPDX-License-Identifier: Apache-2.0
"""nova 34's own scheduler filtering, as nova-scheduler runs it, as an oracle for
tests/placement/placement_python_filters.rs.

Usage: python custom_filters_oracle.py NOVA_CONF. Reads JSON lines on stdin,
writes one line per input line on stdout:

  {"spec_obj": <RequestSpec primitive>, "providers": [compute node uuids],
   "reuse_states": optional, true when the databases do not change between cases}
      -> {"hosts": [the hosts left after the enabled filters, sorted],
          "weights": {host: its weight from [filter_scheduler] weight_classes}}
       | {"raised": "<ExceptionClass>: <message>"}

nova's HostManager reads the host states from the databases nova.conf names
(compute nodes, services, aggregates, instances) exactly as nova-scheduler does,
its filter handler runs [filter_scheduler] enabled_filters over them for the
first instance (get_filtered_hosts, index 0), and its weight handler weighs the
hosts left with [filter_scheduler] weight_classes (get_weighed_hosts).

Run with the venv's python and OS_NOVA_DISABLE_EVENTLET_PATCHING=true; the
operator's modules on PYTHONPATH.
"""

import json
import os
import sys
import warnings

os.environ.setdefault("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
warnings.simplefilter("ignore")

from nova import config  # noqa: E402
from nova import context  # noqa: E402
from nova import objects  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402


def main():
    objects.register_all()
    # As nova-scheduler starts (the RPC transport options are read by the cell
    # mappings; nothing connects to a broker).
    config.parse_args(["nova-scheduler", "--config-file", sys.argv[1]])
    manager = host_manager.HostManager()
    ctx = context.get_admin_context()
    # Host states per set of providers, read once when the caller says the
    # databases stay as they are (filtering and weighing do not change them).
    kept = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        case = json.loads(line)
        spec = objects.RequestSpec.obj_from_primitive(case["spec_obj"])
        try:
            key = tuple(sorted(case["providers"]))
            if case.get("reuse_states") and key in kept:
                states = iter(kept[key])
            else:
                states = manager.get_host_states_by_uuids(
                    ctx, case["providers"], spec)
                if case.get("reuse_states"):
                    kept[key] = list(states)
                    states = iter(kept[key])
            left = list(manager.get_filtered_hosts(states, spec, index=0))
            weighed = manager.get_weighed_hosts(left, spec)
            answer = {
                "hosts": sorted(h.host for h in left),
                "weights": {w.obj.host: w.weight for w in weighed},
            }
        except Exception as e:  # noqa: B902
            answer = {"raised": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
