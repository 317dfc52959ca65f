# SPDX-License-Identifier: Apache-2.0
"""Host filters and a weigher written the way operators write them, for the tests
of the embedded Python (tests/placement/placement_python_filters.rs): one filter
reads the host's aggregates' metadata, one the request's scheduler hints, one the
host's instances; one raises when asked to; the weigher ranks hosts by aggregate
metadata, with a multiplier an aggregate may override."""

from nova.scheduler import filters
from nova.scheduler.filters import utils
from nova.scheduler import utils as scheduler_utils
from nova.scheduler import weights


class LicenceFilter(filters.BaseHostFilter):
    """Hosts in an aggregate whose `licence` metadata is the one the flavor's
    `mycloud:licence` extra spec asks for."""

    def host_passes(self, host_state, spec_obj):
        wanted = spec_obj.flavor.extra_specs.get("mycloud:licence")
        if not wanted:
            return True
        metadata = utils.aggregate_metadata_get_by_host(host_state, key="licence")
        return wanted in metadata.get("licence", set())


class RackHintFilter(filters.BaseHostFilter):
    """With the scheduler hint `rack`, only the hosts whose name starts with it."""

    run_filter_once_per_request = False

    def host_passes(self, host_state, spec_obj):
        rack = spec_obj.get_scheduler_hint("rack")
        if not rack:
            return True
        return host_state.host.startswith(rack)


class InstanceCapFilter(filters.BaseHostFilter):
    """Hosts running fewer instances than the hint `max_instances` (2)."""

    def host_passes(self, host_state, spec_obj):
        cap = int(spec_obj.get_scheduler_hint("max_instances", 2))
        return len(host_state.instances) < cap


class ExplodingFilter(filters.BaseHostFilter):
    """Raises when the request carries the hint `explode`."""

    def host_passes(self, host_state, spec_obj):
        if spec_obj.get_scheduler_hint("explode"):
            raise RuntimeError("exploded on %s" % host_state.host)
        return True


def all_filters():
    return [LicenceFilter, RackHintFilter, InstanceCapFilter, ExplodingFilter]


class RackWeigher(weights.BaseHostWeigher):
    """Prefers hosts in aggregates of a higher `rack_rank`; the multiplier is the
    aggregates' `rack_weight_multiplier`, else 1.0."""

    def weight_multiplier(self, host_state):
        return scheduler_utils.get_weight_multiplier(
            host_state, "rack_weight_multiplier", 1.0)

    def _weigh_object(self, host_state, weight_properties):
        ranks = utils.aggregate_values_from_key(host_state, "rack_rank")
        return max([float(r) for r in ranks] or [0.0])
