# SPDX-License-Identifier: Apache-2.0
"""The embedded interpreter's side of nova-scheduler-rs's Python filters.

An operator's own filter classes (named in [filter_scheduler] available_filters)
run here unchanged: loaded by nova's own HostFilterHandler, handed nova's own
HostState objects (built from the daemon's host states with the attribute types
nova's HostManager gives them) and nova's own RequestSpec (deserialized from the
call's primitive), and called through their filter_all, as nova's filter handler
calls them.

The daemon talks to this module in JSON strings (one per host, one per request),
so that a host's object is rebuilt only when the daemon's state of it changed.
"""

import datetime
import json
import os
import sys
import warnings

_state = {}


def start(config_files, config_dirs):
    """Imports nova and reads the daemon's nova.conf with oslo.config, as nova does
    (database options included, for the instance fields a filter lazy-loads)."""
    os.environ.setdefault("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
    # Import-time warnings of nova's dependencies (eventlet's deprecation) would go
    # to the daemon's stderr, outside its log.
    warnings.simplefilter("ignore")
    import nova.conf
    from nova import context as nova_context
    from nova.db.api import api as api_db_api
    from nova.db.main import api as main_db_api
    from nova import objects
    from nova.scheduler import filters

    objects.register_all()
    args = []
    for path in config_files:
        args += ["--config-file", path]
    for path in config_dirs:
        args += ["--config-dir", path]
    conf = nova.conf.CONF
    conf(args, project="nova", default_config_files=[])
    for db in (main_db_api, api_db_api):
        try:
            db.configure(conf)
        except Exception:  # noqa: B902 -- no database: lazy loads fail as in nova
            pass
    # The RPC transport's options, which the cell mappings read (nothing connects).
    try:
        from nova import rpc

        rpc.init(conf)
    except Exception:  # noqa: B902 -- the instances then load from [database]
        pass
    from nova.scheduler import weights

    _state["handler"] = filters.HostFilterHandler()
    _state["weight_handler"] = weights.HostWeightHandler()
    _state["context"] = nova_context.get_admin_context()
    _state["cells"] = {}
    _state["hosts"] = {}
    _state["spec"] = None
    return "%d.%d.%d" % sys.version_info[:3]


def load_filters(paths):
    """nova's loader over the `available_filters` entries that are not nova's: the
    classes they name (a class path, or a function returning classes), as
    [(class name, module.qualname, run_filter_once_per_request, RUN_ON_REBUILD)]."""
    classes = _state["handler"].get_matching_classes(paths)
    return [
        (
            cls.__name__,
            "%s.%s" % (cls.__module__, cls.__qualname__),
            bool(getattr(cls, "run_filter_once_per_request", False)),
            bool(getattr(cls, "RUN_ON_REBUILD", False)),
        )
        for cls in classes
    ]


def new_filter(paths, name):
    """An instance of the class named `name` that `paths` load (the last one, as
    nova's {cls.__name__: cls} map keeps it)."""
    found = None
    for cls in _state["handler"].get_matching_classes(paths):
        if cls.__name__ == name:
            found = cls
    if found is None:
        raise LookupError("no filter class %s in %s" % (name, paths))
    return found()


def _dt(value):
    if value is None:
        return None
    dt = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return dt


def _cell_context(cell_uuid):
    """An admin context targeted at the host's cell, as nova's HostManager gives its
    Instance objects (so that a filter can lazy-load their fields)."""
    from nova import context as nova_context
    from nova import objects

    cells = _state["cells"]
    if cell_uuid not in cells:
        ctx = _state["context"]
        try:
            mapping = objects.CellMapping.get_by_uuid(ctx, cell_uuid)
            ctx = nova_context.RequestContext(is_admin=True)
            nova_context.set_target_cell(ctx, mapping)
        except Exception:  # noqa: B902 -- no API database: the default one
            ctx = _state["context"]
        cells[cell_uuid] = ctx
    return cells[cell_uuid]


def _host_state(h):
    import netaddr
    from nova import objects
    from nova.pci import stats as pci_stats
    from nova.scheduler import host_manager

    hs = host_manager.HostState(h["host"], h["nodename"], h["cell_uuid"])
    hs.uuid = h["uuid"]
    for key in (
        "total_usable_ram_mb", "free_ram_mb", "total_usable_disk_gb",
        "disk_mb_used", "free_disk_mb", "vcpus_total", "vcpus_used",
        "num_instances", "num_io_ops", "failed_builds", "hypervisor_type",
        "hypervisor_version", "hypervisor_hostname", "cpu_info",
        "supported_instances", "stats", "limits", "cpu_allocation_ratio",
        "ram_allocation_ratio", "disk_allocation_ratio",
        "allocation_candidates",
    ):
        setattr(hs, key, h[key])
    hs.host_ip = netaddr.IPAddress(h["host_ip"]) if h["host_ip"] else None
    hs.updated = _dt(h["updated"])
    hs.numa_topology = (
        objects.NUMATopology.obj_from_primitive(h["numa_topology"])
        if h["numa_topology"]
        else None
    )
    pools = (
        objects.PciDevicePoolList.obj_from_primitive(h["pci_stats"])
        if h["pci_stats"]
        else None
    )
    hs.pci_stats = pci_stats.PciDeviceStats(hs.numa_topology, stats=pools)
    hs.metrics = (
        objects.MonitorMetricList.from_json(json.dumps(h["metrics"]))
        if h["metrics"] is not None
        else None
    )
    hs.aggregates = [
        objects.Aggregate(
            id=a["id"], uuid=a["uuid"], name=a["name"],
            hosts=a["hosts"], metadata=a["metadata"],
        )
        for a in h["aggregates"]
    ]
    ctx = _cell_context(h["cell_uuid"])
    hs.instances = {u: objects.Instance(ctx, uuid=u) for u in h["instances"]}
    service = dict(h["service"])
    for k in ("last_seen_up", "created_at", "updated_at"):
        service[k] = _dt(service.get(k))
    hs.service = host_manager.ReadOnlyDict(service)
    return hs


def host_states(hosts):
    """The HostState of each (key, json) in `hosts`, built again only for a host
    whose json changed since it was last asked for."""
    cache = _state["hosts"]
    out = []
    for key, text in hosts:
        entry = cache.get(key)
        if entry is None or entry[0] != text:
            entry = (text, _host_state(json.loads(text)))
            cache[key] = entry
        out.append(entry[1])
    return out


def request_spec(text, changes_text):
    """The call's RequestSpec (deserialized once for consecutive asks with the same
    primitive `text`), with what the daemon changed since (the request filters'
    destination and root traits, the instance being placed, the group's hosts so
    far)."""
    from nova import objects

    cached = _state["spec"]
    if cached is None or cached[0] != text:
        primitive = json.loads(text)
        ctx = _state["context"]
        if "spec_obj" in primitive:
            spec = objects.RequestSpec.obj_from_primitive(
                primitive["spec_obj"], context=ctx)
        else:
            spec = objects.RequestSpec.from_primitives(
                ctx, primitive.get("request_spec") or {},
                primitive.get("filter_properties") or {})
        cached = (text, spec)
        _state["spec"] = cached
    spec = cached[1]
    changes = json.loads(changes_text)
    if changes.get("instance_uuid") is not None:
        spec.instance_uuid = changes["instance_uuid"]
        spec.obj_reset_changes(["instance_uuid"])
    if "group_hosts" in changes and spec.obj_attr_is_set("instance_group") \
            and spec.instance_group is not None:
        spec.instance_group.hosts = changes["group_hosts"]
        spec.instance_group.obj_reset_changes(["hosts"])
    dest = changes.get("requested_destination")
    if dest is not None:
        if not spec.obj_attr_is_set("requested_destination") \
                or spec.requested_destination is None:
            spec.requested_destination = objects.Destination()
        rd = spec.requested_destination
        rd.aggregates = dest["aggregates"] or None
        rd.forbidden_aggregates = set(dest["forbidden_aggregates"]) or None
    if "root_required" in changes:
        # RequestSpec.root_required is a property of its request_level_params
        # (lazy-defaulted), which the request filters add to.
        params = spec.request_level_params
        params.root_required = set(changes["root_required"])
        params.root_forbidden = set(changes["root_forbidden"])
    return spec


def filter_all(filt, hosts, spec, index):
    """nova's filter handler for one filter: None when the filter does not run for
    this instance, else one verdict per host (nova's filter_all; a None result
    removes every host)."""
    if not filt.run_filter_for_index(index):
        return None
    kept = filt.filter_all(hosts, spec)
    if kept is None:
        return [False] * len(hosts)
    kept = {id(h) for h in kept}
    return [id(h) in kept for h in hosts]


def novas_filter_handler(filt, hosts, spec, index):
    """nova-scheduler's own filter handler running the one class over host states
    it already holds: the number of hosts left. What the class costs in nova, for
    the benchmark that compares it with what it costs here."""
    left = _state["handler"].get_filtered_objects([filt], hosts, spec, index)
    return len(list(left or []))


def new_weighers(path):
    """Instances of the weigher classes a `weight_classes` entry names (a class
    path, or a function returning classes), by nova's loader, in its order, as
    [(class name, instance)]."""
    classes = _state["weight_handler"].get_matching_classes([path])
    return [(cls.__name__, cls()) for cls in classes]


def weigh_all(weigher, hosts, spec):
    """nova's weight handler for one weigher: its weigh_objects over the list, the
    minval and maxval it leaves to normalize with, and each host's multiplier."""
    from nova.scheduler import weights

    weighed = [weights.WeighedHost(h, 0.0) for h in hosts]
    raw = weigher.weigh_objects(weighed, spec)
    return (
        [float(w) for w in raw],
        None if weigher.minval is None else float(weigher.minval),
        None if weigher.maxval is None else float(weigher.maxval),
        [float(weigher.weight_multiplier(h)) for h in hosts],
    )
