# SPDX-License-Identifier: Apache-2.0
"""nova 34's NUMA code as an oracle for tests/differential/differential_numa.rs.

Reads JSON lines on stdin, writes one JSON line per input line on stdout.

  {"op": "pyset", "a": [ints], "b": [ints]}
      -> iteration orders of the set operations nova's NUMA code uses
         (set(list), field coercion, -, &, |=), as lists.

  {"op": "case", "host": {...}, "flavor": {...}, "image_props": {...},
   "network_metadata": {...} | null, "pack": bool, "instances": n,
   "run_filter": bool}
      -> {"constraints": <InstanceNUMATopology primitive> | null}
         or {"constraints_error": "<ExceptionClass>"}, plus "steps": one per
         instance: nova's NUMATopologyFilter.host_passes on a HostState
         (candidates kept, limits), then HostState.consume_from_request (the
         fitted topology written into the spec, and the host's NUMA usage after).
         "direct" is numa_fit_instance_to_host on a copy with the host's ratios.

`host` = {"numa_topology": primitive, "cpu_allocation_ratio", "ram_allocation_ratio",
"pci_pools": [[numa_node, count], ...], "candidates": n}: pool i is product "p<i>"
of vendor "v". An optional "pci_requests": [{"count", "product_id" | null,
"numa_policy" | null, "request_id"}, ...] becomes the spec's InstancePCIRequests
(spec [{"vendor_id": "v"(, "product_id")}], alias "a"); each step then also reports
"pci_pools": [[product_id, numa_node, count], ...] of the host after consumption.

Anything the oracle cannot build is answered {"oracle_error": text}.
Run with the venv's python and OS_NOVA_DISABLE_EVENTLET_PATCHING=true.
"""

import copy
import json
import os
import sys
import warnings

os.environ.setdefault("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
warnings.simplefilter("ignore")

from nova import objects  # noqa: E402

objects.register_all()

import nova.conf  # noqa: E402
from oslo_versionedobjects import fields as ovo_fields  # noqa: E402
from nova.pci import stats as pci_stats  # noqa: E402
from nova.scheduler.filters import numa_topology_filter  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402
from nova.virt import hardware  # noqa: E402

CONF = nova.conf.CONF


def kind(e):
    return type(e).__name__


def pyset_orders(a, b):
    sa = set(a)
    sb = set(b)
    coerced = ovo_fields.Set(ovo_fields.Integer()).coerce(None, "x", sa)
    merged = set(sa)
    merged |= sb
    copy_then = set()
    copy_then.update(sa)
    return {
        "set": list(sa),
        "coerced": list(coerced),
        "minus": list(sa - sb),
        "and": list(sa & sb),
        "merged": list(merged),
        "update_empty": list(copy_then),
    }


def host_summary(topology):
    if topology is None:
        return None
    out = []
    for c in topology.cells:
        out.append(
            {
                "id": c.id,
                "cpu_usage": c.cpu_usage,
                "memory_usage": c.memory_usage,
                "pinned": list(c.pinned_cpus),
                "pages": [
                    # an unset `reserved` reads as 0 (nova's `free` even sets it)
                    [p.size_kb, p.total, p.used, p.reserved if "reserved" in p else 0]
                    for p in c.mempages
                ],
            }
        )
    return out


def build_host(h):
    state = host_manager.HostState("host1", "node1", "cell1")
    state.numa_topology = objects.NUMATopology.obj_from_primitive(h["numa_topology"])
    state.cpu_allocation_ratio = h["cpu_allocation_ratio"]
    state.ram_allocation_ratio = h["ram_allocation_ratio"]
    pools = objects.PciDevicePoolList(
        objects=[
            objects.PciDevicePool(
                product_id="p%d" % i, vendor_id="v", numa_node=node, count=count, tags={}
            )
            for i, (node, count) in enumerate(h.get("pci_pools", []))
        ]
    )
    state.pci_stats = pci_stats.PciDeviceStats(state.numa_topology, stats=pools)
    state.allocation_candidates = [{"mappings": {}} for _ in range(h["candidates"])]
    state.free_ram_mb = 100000
    state.free_disk_mb = 100000
    state.limits = {}
    return state


def build_pci_requests(reqs):
    if reqs is None:
        return None
    out = []
    for r in reqs:
        spec = {"vendor_id": "v"}
        if r.get("product_id") is not None:
            spec["product_id"] = r["product_id"]
        req = objects.InstancePCIRequest(
            count=r["count"], spec=[spec], alias_name="a", request_id=r["request_id"]
        )
        if r.get("numa_policy") is not None:
            req.numa_policy = r["numa_policy"]
        out.append(req)
    return objects.InstancePCIRequests(requests=out)


def pools_summary(stats):
    return [[p.get("product_id"), p.get("numa_node"), p["count"]] for p in stats.pools]


def primitive_or_none(obj):
    return None if obj is None else obj.obj_to_primitive()


def run_case(case):
    CONF.set_override(
        "packing_host_numa_cells_allocation_strategy", case["pack"], group="compute"
    )
    try:
        f = case["flavor"]
        flavor = objects.Flavor(
            name="f",
            flavorid="f",
            vcpus=f["vcpus"],
            memory_mb=f["memory_mb"],
            root_gb=1,
            ephemeral_gb=0,
            swap=0,
            extra_specs=f["extra_specs"],
        )
        image = objects.ImageMeta.from_dict({"properties": case["image_props"]})
        host = build_host(case["host"])
    except Exception as e:  # noqa: B902
        return {"oracle_error": "%s: %s" % (kind(e), e)}
    try:
        constraints = hardware.numa_get_constraints(flavor, image)
    except Exception as e:  # noqa: B902
        return {"constraints_error": kind(e)}
    spec = objects.RequestSpec(
        flavor=flavor,
        image=image,
        numa_topology=constraints,
        pci_requests=build_pci_requests(case.get("pci_requests")),
        num_instances=case["instances"],
        instance_uuid="00000000-0000-0000-0000-000000000001",
    )
    if case.get("network_metadata") is not None:
        nm = case["network_metadata"]
        spec.network_metadata = objects.NetworkMetadata(
            physnets=set(nm["physnets"]), tunneled=nm["tunneled"]
        )
    out = {"constraints": primitive_or_none(constraints), "steps": []}
    filt = numa_topology_filter.NUMATopologyFilter()
    for _ in range(case["instances"]):
        step = {}
        # the fit on its own, with the host's ratios, on a copy of the request
        limits = objects.NUMATopologyLimits(
            cpu_allocation_ratio=host.cpu_allocation_ratio,
            ram_allocation_ratio=host.ram_allocation_ratio,
        )
        if "network_metadata" in spec:
            limits.network_metadata = spec.network_metadata
        try:
            direct = hardware.numa_fit_instance_to_host(
                host.numa_topology,
                copy.deepcopy(spec.numa_topology),
                limits=limits,
                pci_requests=spec.pci_requests.requests if spec.pci_requests else None,
                pci_stats=host.pci_stats,
                provider_mapping={},
            )
            step["direct"] = primitive_or_none(direct)
        except Exception as e:  # noqa: B902
            step["direct_error"] = kind(e)
        if case["run_filter"]:
            try:
                step["passes"] = bool(filt.host_passes(host, spec))
            except Exception as e:  # noqa: B902
                step["filter_error"] = kind(e)
                out["steps"].append(step)
                break
            step["candidates"] = len(host.allocation_candidates)
            lim = host.limits.get("numa_topology")
            step["limits"] = primitive_or_none(lim)
            if not step["passes"]:
                out["steps"].append(step)
                break
        io_before = host.num_io_ops
        host.consume_from_request(spec)
        step["consumed"] = host.num_io_ops != io_before
        step["fitted"] = primitive_or_none(spec.numa_topology)
        step["host"] = host_summary(host.numa_topology)
        if case.get("pci_requests") is not None:
            step["pci_pools"] = pools_summary(host.pci_stats)
        out["steps"].append(step)
    return out


def main():
    out = sys.stdout
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            case = json.loads(line)
            if case["op"] == "pyset":
                answer = pyset_orders(case["a"], case["b"])
            else:
                answer = run_case(case)
        except Exception as e:  # noqa: B902
            answer = {"oracle_error": "%s: %s" % (kind(e), e)}
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
