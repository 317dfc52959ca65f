# SPDX-License-Identifier: Apache-2.0
"""nova 34's own resource request code as an oracle for
tests/differential/differential_resource_request.rs.

Reads JSON lines on stdin, writes one JSON line per input line on stdout.

Input:  {"spec": <RequestSpec primitive>, "max_placement_results": int,
         "target_nodes": null | [{"uuid", "host", "hypervisor_hostname"}],
         "prefilters": {"query_placement_for_image_type_support": bool,
                        "image_metadata_prefilter": bool}}
With "owner_nova": true, owner_nova_filter runs last as if every nova-compute
were at version 73 or later (its only database read), and "group_traits" lists
[requester_id, sorted required traits] of each requested group.

Output: {"prefilter_error": null | [class, str(exc)],
         "root_required": [...], "root_forbidden": [...],
         "first": null | querystring, "pinning": bool,
         "fallback": null | querystring,
         "error": null | [class, str(exc)],
         "destination": null | [host, node]}

The spec primitive is turned into nova's RequestSpec with obj_from_primitive (the
same JSON the Rust side decodes). The request filters that need neither a database
nor Neutron run first, in nova's order (nova's functions, called as
process_reqspec calls them); then nova's resources_from_request_spec with
enable_pinning_translate=True and, when it says pinning was requested, False
again on the same spec (the manager's fallback query). The only stand-in is the
compute-node lookup of the target host/node (a database read), which answers the
nodes given in "target_nodes" as nova ComputeNode objects.

A line {"db_case": {"api_db": <SQLAlchemy URL>, "spec": <primitive>,
"options": {<[scheduler] option>: bool}}} instead runs nova's database-reading
request filters require_tenant_aggregate, map_az_to_placement_aggregate and
isolate_aggregates (in nova's order) against that API database and answers
{"aggregates": [[uuid, ...], ...] (each entry split and sorted),
 "forbidden_aggregates": [...], "error": null | [class, str(exc)]}.

Anything the oracle itself cannot build is answered {"oracle_error": text}.
Run with the venv's python.
"""

import json
import os
import sys
import warnings

os.environ.setdefault("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
warnings.simplefilter("ignore")

import logging  # noqa: E402

logging.disable(logging.CRITICAL)

from nova import objects  # noqa: E402

objects.register_all()

import nova.conf  # noqa: E402
from nova.scheduler import request_filter  # noqa: E402
from nova.scheduler import utils  # noqa: E402

CONF = nova.conf.CONF
CONF([], project="nova")

PURE_FILTERS = [
    request_filter.require_image_type_support,
    request_filter.compute_status_filter,
    request_filter.transform_image_metadata,
    request_filter.accelerators_filter,
    request_filter.packed_virtqueue_filter,
    request_filter.ephemeral_encryption_filter,
    request_filter.virtio_sound_filter,
    request_filter.tpm_secret_security_filter,
]


class NodeLookup(object):
    """The database read of HostManager.get_compute_nodes_by_host_or_node."""

    def __init__(self, nodes):
        self.nodes = nodes
        self.calls = []

    def get_compute_nodes_by_host_or_node(self, ctxt, host, node, cell=None):
        self.calls.append((host, node))
        return objects.ComputeNodeList(objects=[
            objects.ComputeNode(uuid=n["uuid"], host=n["host"],
                                hypervisor_hostname=n["hypervisor_hostname"])
            for n in (self.nodes or [])])


def exc_pair(e):
    return [type(e).__name__, str(e)]


def run(case):
    spec = objects.RequestSpec.obj_from_primitive(case["spec"])
    CONF.set_override("max_placement_results", case["max_placement_results"],
                      group="scheduler")
    for opt, value in case.get("prefilters", {}).items():
        CONF.set_override(opt, value, group="scheduler")
    out = {"prefilter_error": None, "first": None, "pinning": False,
           "fallback": None, "error": None, "destination": None}
    try:
        for f in PURE_FILTERS:
            f(None, spec)
        if case.get("owner_nova"):
            # Stand-in for the database read: every nova-compute is new enough.
            request_filter._should_filter_by_owner = lambda ctxt: True
            request_filter.owner_nova_filter(None, spec)
    except Exception as e:  # noqa: BLE001 - the class is the answer
        out["prefilter_error"] = exc_pair(e)
        return out
    out["group_traits"] = sorted(
        [g.requester_id, sorted(g.required_traits)]
        for g in ((spec.requested_resources or [])
                  if "requested_resources" in spec else [])
        if g.requester_id)
    out["root_required"] = sorted(spec.root_required)
    out["root_forbidden"] = sorted(spec.root_forbidden)
    lookup = NodeLookup(case.get("target_nodes"))
    try:
        first = utils.resources_from_request_spec(None, spec, lookup, True)
        out["first"] = first.to_querystring()
        out["pinning"] = bool(first.cpu_pinning_requested)
        if first.cpu_pinning_requested:
            second = utils.resources_from_request_spec(None, spec, lookup, False)
            out["fallback"] = second.to_querystring()
    except Exception as e:  # noqa: BLE001
        out["error"] = exc_pair(e)
    if ("requested_destination" in spec and spec.requested_destination
            and lookup.calls):
        d = spec.requested_destination
        out["destination"] = [d.host if "host" in d else None,
                              d.node if "node" in d else None]
    return out


DB_FILTERS = [
    request_filter.require_tenant_aggregate,
    request_filter.map_az_to_placement_aggregate,
    request_filter.isolate_aggregates,
]
_db_configured = []


def run_db(case):
    from nova import context as nova_context
    from nova.db.api import api as api_db_api
    if not _db_configured:
        CONF.set_override("connection", case["api_db"], group="api_database")
        api_db_api.configure(CONF)
        _db_configured.append(True)
    spec = objects.RequestSpec.obj_from_primitive(case["spec"])
    for opt, value in case.get("options", {}).items():
        CONF.set_override(opt, value, group="scheduler")
    out = {"aggregates": None, "forbidden_aggregates": None, "error": None}
    ctxt = nova_context.get_admin_context()
    try:
        for f in DB_FILTERS:
            f(ctxt, spec)
    except Exception as e:  # noqa: BLE001
        out["error"] = exc_pair(e)
    finally:
        for opt in case.get("options", {}):
            CONF.clear_override(opt, group="scheduler")
    d = spec.requested_destination if "requested_destination" in spec else None
    if d is not None:
        out["aggregates"] = [sorted(e.split(",")) for e in (d.aggregates or [])]
        out["forbidden_aggregates"] = sorted(d.forbidden_aggregates or [])
    return out


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            case = json.loads(line)
            answer = run_db(case["db_case"]) if "db_case" in case else run(case)
        except Exception as e:  # noqa: BLE001
            answer = {"oracle_error": "%s: %s" % (type(e).__name__, e)}
        finally:
            CONF.clear_override("max_placement_results", group="scheduler")
            CONF.clear_override("query_placement_for_image_type_support",
                                group="scheduler")
            CONF.clear_override("image_metadata_prefilter", group="scheduler")
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
