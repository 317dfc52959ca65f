# SPDX-License-Identifier: Apache-2.0
"""nova 34's own host filters as an oracle for tests/differential/differential_filters.rs.

Reads JSON lines on stdin, writes one line per input line on stdout:

  {"filter": "<nova class name>", "host": {...}, "spec": {...}, "config": {...}}
      -> "true" | "false" | "raise:<ExceptionClass>"
  {"meta": "<nova class name>"}
      -> {"run_filter_once_per_request": bool, "RUN_ON_REBUILD": bool}

Anything the oracle itself cannot build is answered "oracle-error:<text>", which the
harness reports as a failure (never as a filter outcome).

The filter is nova's class from nova.scheduler.filters.all_filters(), called as
nova's handler calls it: filter.host_passes(host_state, spec_obj).

`host` holds nova HostState attribute names (see build_host): plain values are
set as they are; `stats` is a dict of strings; `service` becomes nova's
ReadOnlyDict (ISO datetimes parsed); `host_ip` a netaddr.IPAddress (as nova's
ComputeNode.host_ip is); `aggregates` real nova.objects.Aggregate objects;
`instances` a list of uuids -> {uuid: nova.objects.Instance}; `updated` a datetime.
`spec` is turned into a real nova.objects.RequestSpec (see build_spec).
`config` is {"<group>": {"<option>": value}} applied with CONF.set_override
for that one case ("DEFAULT" for the default group).

Run with the venv's python and OS_NOVA_DISABLE_EVENTLET_PATCHING=true.
"""

import datetime
import json
import os
import sys
import warnings

os.environ.setdefault("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
warnings.simplefilter("ignore")

import netaddr  # noqa: E402

from nova import objects  # noqa: E402

objects.register_all()

import nova.conf  # noqa: E402
from nova.scheduler import filters as nova_filters  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402
from nova.scheduler.filters import aggregate_instance_extra_specs  # noqa: E402
from nova.scheduler.filters import utils as filter_utils  # noqa: E402

CONF = nova.conf.CONF
CLASSES = {cls.__name__: cls for cls in nova_filters.all_filters()}

# The exception classes the harness distinguishes; subclasses (JSONDecodeError is a
# ValueError) report as their base.
KINDS = (RecursionError, ValueError, TypeError, KeyError, IndexError, AttributeError)


class _SortedAggregateUtils(object):
    """AggregateInstanceExtraSpecsFilter walks each metadata value *set* in Python's
    hash order, which is randomized per process. The Rust filter walks them sorted;
    this hands nova's filter the same order (sorted lists instead of sets). Only the
    order changes; it matters only when one value raises and another matches."""

    def aggregate_metadata_get_by_host(self, host_state, key=None):
        md = filter_utils.aggregate_metadata_get_by_host(host_state, key)
        return {k: sorted(v) for k, v in md.items()}


aggregate_instance_extra_specs.utils = _SortedAggregateUtils()


def parse_dt(value):
    if value is None:
        return None
    dt = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return dt


def build_host(h):
    hs = host_manager.HostState(h["host"], h["nodename"], h.get("cell_uuid"))
    for key, value in h.items():
        if key in ("host", "nodename", "cell_uuid"):
            continue
        if key == "service":
            svc = dict(value)
            for k in ("last_seen_up", "created_at", "updated_at", "deleted_at"):
                if k in svc:
                    svc[k] = parse_dt(svc[k])
            value = host_manager.ReadOnlyDict(svc)
        elif key == "host_ip":
            value = netaddr.IPAddress(value) if value is not None else None
        elif key == "aggregates":
            value = [
                objects.Aggregate(
                    id=a["id"],
                    uuid=a.get("uuid", "00000000-0000-0000-0000-%012d" % a["id"]),
                    name=a.get("name", "agg%d" % a["id"]),
                    hosts=list(a.get("hosts", [h["host"]])),
                    metadata=dict(a.get("metadata", {})),
                )
                for a in value
            ]
        elif key == "instances":
            value = {u: objects.Instance(uuid=u) for u in value}
        elif key == "updated":
            value = parse_dt(value)
        elif key == "metrics":
            # compute_nodes.metrics as HostState.update() loads it.
            value = (
                objects.MonitorMetricList.from_json(json.dumps(value))
                if value is not None
                else None
            )
        setattr(hs, key, value)
    return hs


def build_image(i):
    """An ImageMeta as select_destinations receives it: deserialized from the RPC
    primitive, so every property goes through its typed field's coercion."""
    if i is None:
        return None
    data = {
        "properties": {
            "nova_object.name": "ImageMetaProps",
            "nova_object.namespace": "nova",
            "nova_object.version": objects.ImageMetaProps.VERSION,
            "nova_object.data": i.get("properties", {}),
        }
    }
    if "id" in i:
        data["id"] = i["id"]
    return objects.ImageMeta.obj_from_primitive(
        {
            "nova_object.name": "ImageMeta",
            "nova_object.namespace": "nova",
            "nova_object.version": objects.ImageMeta.VERSION,
            "nova_object.data": data,
        }
    )


def build_spec(s):
    kwargs = {}
    if "flavor" in s:
        f = dict(s["flavor"])
        f.setdefault("memory_mb", 512)
        f.setdefault("vcpus", 1)
        f.setdefault("root_gb", 1)
        f.setdefault("ephemeral_gb", 0)
        f.setdefault("swap", 0)
        f.setdefault("name", "flavor")
        f.setdefault("extra_specs", {})
        kwargs["flavor"] = objects.Flavor(**f)
    if "image" in s:
        kwargs["image"] = build_image(s["image"])
    if "instance_group" in s:
        g = s["instance_group"]
        kwargs["instance_group"] = objects.InstanceGroup(**g) if g is not None else None
    for key in (
        "project_id",
        "user_id",
        "instance_uuid",
        "num_instances",
        "availability_zone",
        "scheduler_hints",
        "ignore_hosts",
        "force_hosts",
        "force_nodes",
    ):
        if key in s:
            kwargs[key] = s[key]
    return objects.RequestSpec(**kwargs)


def apply_config(config):
    applied = []
    for group, options in (config or {}).items():
        grp = None if group == "DEFAULT" else group
        for name, value in options.items():
            CONF.set_override(name, value, group=grp)
            applied.append((name, grp))
    return applied


def run_case(case):
    if "meta" in case:
        cls = CLASSES[case["meta"]]
        return json.dumps(
            {
                "run_filter_once_per_request": bool(cls.run_filter_once_per_request),
                "RUN_ON_REBUILD": bool(cls.RUN_ON_REBUILD),
            }
        )
    try:
        cls = CLASSES[case["filter"]]
        host = build_host(case["host"])
        spec = build_spec(case["spec"])
        applied = apply_config(case.get("config"))
    except Exception as e:  # noqa: B902
        return "oracle-error:%s: %s" % (type(e).__name__, e)
    try:
        filt = cls()
        try:
            passes = filt.host_passes(host, spec)
        except KINDS as e:
            kind = next(k for k in KINDS if isinstance(e, k))
            return "raise:" + kind.__name__
        except Exception as e:  # noqa: B902
            return "raise:Other:" + type(e).__name__
        return "true" if passes else "false"
    finally:
        for name, grp in applied:
            CONF.clear_override(name, group=grp)


def main():
    out = sys.stdout
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            answer = run_case(json.loads(line))
        except Exception as e:  # noqa: B902
            answer = "oracle-error:%s: %s" % (type(e).__name__, e)
        out.write(answer + "\n")
    out.flush()


if __name__ == "__main__":
    sys.setrecursionlimit(1000)
    main()
