# SPDX-License-Identifier: Apache-2.0
"""nova 34's own weighers and weight handler as an oracle for
tests/differential/differential_weighers.rs.

Reads JSON lines on stdin, writes one line per input line on stdout:

  {"weighers": ["<nova class name>", ...], "hosts": [{...}, ...], "spec": {...},
   "config": {...}, "sysmeta": {"<instance uuid>": [["key", "value"], ...]}}
      -> {"order": [host index, ...], "weights": [weight, ...]}   (sorted, best first)
       | "raise:<ExceptionClass>"

Anything the oracle itself cannot build is answered "oracle-error:<text>".

The weighers are nova's classes from nova.scheduler.weights.all_weighers(),
instantiated after the case's config overrides are applied (MetricsWeigher and
ImagePropertiesWeigher parse their settings in __init__), in the order the case
lists them, and run through nova's HostWeightHandler.get_weighed_objects.

Hosts and specs are built by filters_oracle.build_host / build_image (same
directory), plus: `pci_pools` -> a real PciDeviceStats holding those pools;
`requested_destination` -> a Destination with a CellMapping.

ImagePropertiesWeigher reads the instances' system_metadata from the cell
database. Here the cell lookup and InstanceList.fill_metadata are replaced by the
case's `sysmeta` (rows in database order, as nova's metadata_to_dict applies
them); an instance without rows behaves as one missing from the database
(lazy-loading it raises InstanceNotFound, which nova's weigher catches).

Run with the venv's python and OS_NOVA_DISABLE_EVENTLET_PATCHING=true.
"""

import contextlib
import json
import logging
import math
import os
import sys
import warnings

os.environ.setdefault("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
warnings.simplefilter("ignore")
# nova warns about every unparsable multiplier and setting; the harness compares
# results, not log lines.
logging.disable(logging.WARNING)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import filters_oracle  # noqa: E402  (registers nova's objects)

from nova import context as nova_context  # noqa: E402
from nova import exception  # noqa: E402
from nova import objects  # noqa: E402
from nova.pci import stats as pci_stats  # noqa: E402
from nova.scheduler import weights as nova_weights  # noqa: E402
try:
    from nova.scheduler.weights import image_props  # noqa: E402
except ImportError:  # nova 29 and 30 have no ImagePropertiesWeigher
    image_props = None

CLASSES = {cls.__name__: cls for cls in nova_weights.all_weighers()}
HANDLER = nova_weights.HostWeightHandler()

# The system metadata of the current case, by instance uuid.
SYSMETA = {}


def _get_cell_by_uuid(ctxt, uuid):
    return objects.CellMapping(uuid=uuid, name="cell", transport_url="none:///",
                               database_connection="none:///")


@contextlib.contextmanager
def _target_cell(ctxt, cell_mapping):
    yield ctxt


def _fill_metadata(self):
    for inst in self:
        rows = SYSMETA.get(inst.uuid)
        if rows is not None:
            inst.system_metadata = {k: v for k, v in rows}
            inst.image_ref = None


def _load_attr(self, attrname):
    raise exception.InstanceNotFound(instance_id=self.uuid)


if image_props is not None:
    image_props.objects.CellMapping.get_by_uuid = _get_cell_by_uuid
    image_props.nova_context.target_cell = _target_cell
objects.InstanceList.fill_metadata = _fill_metadata
objects.Instance.obj_load_attr = _load_attr


def build_pci_stats(pools):
    if pools is None:
        return None
    pool_list = objects.PciDevicePoolList(objects=[
        objects.PciDevicePool(product_id="p%d" % i, vendor_id="8086",
                              numa_node=None, count=count, tags={})
        for i, count in enumerate(pools)
    ])
    return pci_stats.PciDeviceStats(objects.NUMATopology(cells=[]),
                                    stats=pool_list)


def build_hosts(hosts):
    built = []
    for h in hosts:
        h = dict(h)
        pools = h.pop("pci_pools", None)
        hs = filters_oracle.build_host(h)
        hs.pci_stats = build_pci_stats(pools)
        built.append(hs)
    return built


def build_spec(s):
    kwargs = {"image": filters_oracle.build_image(s.get("image"))}
    g = s.get("instance_group")
    if g is not None:
        kwargs["instance_group"] = objects.InstanceGroup(**g)
    else:
        kwargs["instance_group"] = None
    d = s.get("requested_destination")
    if d is not None:
        dest = objects.Destination()
        if "cell_uuid" in d:
            dest.cell = (objects.CellMapping(uuid=d["cell_uuid"])
                         if d["cell_uuid"] is not None else None)
        if "allow_cross_cell_move" in d:
            dest.allow_cross_cell_move = d["allow_cross_cell_move"]
        kwargs["requested_destination"] = dest
    elif "requested_destination" in s:
        kwargs["requested_destination"] = None
    return objects.RequestSpec(**kwargs)


def number(x):
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)
    return x


def run_case(case):
    global SYSMETA
    try:
        hosts = build_hosts(case["hosts"])
        spec = build_spec(case["spec"])
        SYSMETA = case.get("sysmeta") or {}
        applied = filters_oracle.apply_config(case.get("config"))
    except Exception as e:  # noqa: B902
        return "oracle-error:%s: %s" % (type(e).__name__, e)
    try:
        try:
            weighers = [CLASSES[name]() for name in case["weighers"]]
            weighed = HANDLER.get_weighed_objects(weighers, hosts, spec)
        except KeyError as e:
            return "oracle-error:unknown weigher %s" % e
        except Exception as e:  # noqa: B902
            return "raise:" + type(e).__name__
        index = {id(h): i for i, h in enumerate(hosts)}
        return json.dumps({
            "order": [index[id(w.obj)] for w in weighed],
            "weights": [number(float(w.weight)) for w in weighed],
        })
    finally:
        for name, grp in applied:
            filters_oracle.CONF.clear_override(name, group=grp)


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
    main()
