# SPDX-License-Identifier: Apache-2.0
"""nova 34's own PCI code as an oracle for tests/differential/differential_pci.rs.

Reads one JSON object per line on stdin and answers one JSON object per line:

  in:  {"pools": <compute_nodes.pci_stats column JSON, or null>,
        "requests": [<InstancePCIRequest field dicts>]          (wire requests), or
        "aliases": ["<[pci] alias entry>", ...], "pci_in_placement": bool,
        "flavor_alias": "<pci_passthrough:alias>", "affinity_policy": str|null,
        "request_ids": [str, ...]                               (flavor requests),
        "candidates": [{"mappings": {...}}, ...],
        "numa": null | {"cells": [int], "host_cells": null | [[id, socket|null]]},
        "consume_groups": [[requester_id|null, [rp, ...]], ...], "consumes": int}
  out: {"alias": "ok" | "raise:<Exception>", "requests": [...],   (built requests)
        "filter": "true" | "false" | "raise:<Exception>", "kept": [candidate index],
        "numa": null | "true" | "false" | "raise:<Exception>",
        "consumed": [{"ok": bool, "pools": [pool dict, ...]}, ...]}

The filter is nova's PciPassthroughFilter.host_passes on a real HostState whose
pci_stats is PciDeviceStats(stats=from_pci_stats(column)); `numa` calls
support_requests(requests, {}, numa_cells) on a copy whose host NUMA topology has the
given cells and sockets; each consume is nova's HostState.consume_from_request (ok =
it ran to the end, i.e. num_io_ops went up), pools read back with list(pci_stats).
`[pci] alias` is set with CONF.set_override and get_alias_from_config's cache cleared
per case. Anything the oracle cannot build answers {"oracle_error": "<text>"}.

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
from nova.objects import pci_device_pool  # noqa: E402
from nova.pci import request as pci_request  # noqa: E402
from nova.pci import stats as pci_stats  # noqa: E402
from nova.scheduler.filters import pci_passthrough_filter  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402

CONF = nova.conf.CONF
# Quiet nova's logging of swallowed consume errors.
import logging  # noqa: E402

logging.disable(logging.CRITICAL)


def kind(exc):
    return "raise:" + type(exc).__name__


def build_requests(case):
    """(outcome, requests list or None)."""
    if "aliases" in case:
        CONF.set_override("alias", case["aliases"], group="pci")
        CONF.set_override("pci_in_placement", case.get("pci_in_placement", False),
                          group="filter_scheduler")
        pci_request.get_alias_from_config.cache_clear()
        flavor = objects.Flavor(extra_specs={})
        if case.get("flavor_alias") is not None:
            flavor.extra_specs = {"pci_passthrough:alias": case["flavor_alias"]}
        try:
            reqs = pci_request.get_pci_requests_from_flavor(
                flavor, affinity_policy=case.get("affinity_policy"))
        except Exception as exc:  # nova raises several kinds here
            return kind(exc), None
        ids = case.get("request_ids", [])
        for i, r in enumerate(reqs.requests):
            r.request_id = ids[i] if i < len(ids) else None
        return "ok", reqs.requests
    reqs = []
    for fields in case["requests"]:
        r = objects.InstancePCIRequest()
        for k, v in fields.items():
            setattr(r, k, v)
        reqs.append(r)
    return "ok", reqs


def request_json(r):
    out = {}
    for k in ("count", "spec", "alias_name", "request_id", "numa_policy",
              "requester_id"):
        out[k] = getattr(r, k) if r.obj_attr_is_set(k) else None
    return out


def make_host(case):
    hs = host_manager.HostState("h1", "n1", "cell1")
    hs.free_ram_mb = 0
    hs.free_disk_mb = 0
    hs.vcpus_used = 0
    hs.num_instances = 0
    hs.num_io_ops = 0
    pools = case.get("pools")
    raw = None if pools is None else json.dumps(pools)
    device_pools = (pci_device_pool.from_pci_stats(raw)
                    if raw is not None else None)
    hs.pci_stats = pci_stats.PciDeviceStats(None, stats=device_pools)
    hs.allocation_candidates = copy.deepcopy(case.get("candidates", []))
    for i, c in enumerate(hs.allocation_candidates):
        c["__index"] = i
    return hs


def handle(case):
    out = {}
    outcome, reqs = build_requests(case)
    out["alias"] = outcome
    if reqs is None:
        return out
    out["requests"] = [request_json(r) for r in reqs]
    spec = objects.RequestSpec(
        pci_requests=objects.InstancePCIRequests(requests=reqs),
        flavor=objects.Flavor(memory_mb=0, vcpus=0, root_gb=0, ephemeral_gb=0,
                              swap=0, extra_specs={}),
        numa_topology=None)
    hs = make_host(case)
    try:
        passed = pci_passthrough_filter.PciPassthroughFilter().host_passes(
            hs, spec)
        out["filter"] = "true" if passed else "false"
        out["kept"] = [c["__index"] for c in hs.allocation_candidates]
    except Exception as exc:
        out["filter"] = kind(exc)
    numa = case.get("numa")
    if numa is None:
        out["numa"] = None
    else:
        # The filter left the pools alone (support_requests works on a deep copy).
        stats = hs.pci_stats
        if numa["host_cells"] is not None:
            stats.numa_topology = objects.NUMATopology(cells=[
                objects.NUMACell(id=cid, socket=sock, cpuset=set(),
                                 pcpuset=set(), memory=0, siblings=[],
                                 mempages=[])
                for cid, sock in numa["host_cells"]])
        cells = [objects.InstanceNUMACell(id=c) for c in numa["cells"]]
        try:
            ok = stats.support_requests(reqs, {}, numa_cells=cells)
            out["numa"] = "true" if ok else "false"
        except Exception as exc:
            out["numa"] = kind(exc)
    spec.requested_resources = [
        objects.RequestGroup(requester_id=rid, provider_uuids=rps)
        for rid, rps in case.get("consume_groups", [])]
    hs = make_host(case)
    consumed = []
    for _ in range(case.get("consumes", 0)):
        before = hs.num_io_ops
        hs.consume_from_request(spec)
        consumed.append({"ok": hs.num_io_ops > before,
                         "pools": [dict(p) for p in hs.pci_stats]})
    out["consumed"] = consumed
    return out


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            result = handle(json.loads(line))
        except Exception as exc:  # the oracle's own failure, never an outcome
            result = {"oracle_error": "%s: %s" % (type(exc).__name__, exc)}
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
