# SPDX-License-Identifier: Apache-2.0
"""Host filters written the way operators write them, for the tests of the
embedded Python (tests/placement/placement_python_filters.rs): one reads the
host's aggregates' metadata, one the request's scheduler hints, one the host's
instances; one raises when asked to."""

from nova.scheduler import filters
from nova.scheduler.filters import utils


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
