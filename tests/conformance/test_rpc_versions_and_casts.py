"""The older select_destinations RPC versions and the aggregate fanout casts, sent by
nova's own SchedulerAPI (as conductors pinned with [upgrade_levels] scheduler and
nova-api send them), against the scheduler under test. Each expectation is nova's
own behaviour: run with NSRS_SCHEDULER_CMD=nova to check the tests themselves.
"""

import pytest

import nsrs_helpers as H

pytestmark = pytest.mark.usefixtures("scheduler")


def test_the_scheduler_under_test_runs_as_the_clouds_release(scheduler, seeded):
    """The stack is this run's nova release (its nova-manage, computes at its service
    version): nova-scheduler-rs says it schedules as that release (nova_release = auto),
    the reference nova-scheduler is that release's own."""
    if scheduler["log"] is None:
        pytest.skip("an external scheduler: no log to read")
    with open(scheduler["log"], errors="replace") as f:
        H.assert_runs_as_this_release(scheduler["cmd"], f.read())


@pytest.fixture
def pinned_api(nova):
    """SchedulerAPI(upgrade_level) -> a client capped like a conductor of that release."""
    from nova.scheduler import rpcapi

    made = []

    def make(level):
        nova.conf.set_override("scheduler", level, group="upgrade_levels")
        made.append(level)
        return rpcapi.SchedulerAPI()

    yield make
    nova.conf.clear_override("scheduler", group="upgrade_levels")


def assert_legacy_dicts(seeded, result, n):
    assert isinstance(result, list) and len(result) == n, result
    for d in result:
        assert set(d) == {"host", "nodename", "limits"}, d
        node = [s for s in seeded.values() if (s["host"], s["nodename"]) == (d["host"], d["nodename"])]
        assert len(node) == 1, f"{d} is no seeded compute node"
        assert node[0]["up"] and not node[0]["disabled"], f"{d['host']} is down or disabled"
        assert d["limits"] == {}, d


@pytest.mark.parametrize("level,version,claims", [
    ("pike", "4.4", True),     # spec_obj + instance_uuids: claims, legacy dicts back
    ("ocata", "4.3", False),   # spec_obj only: nova's legacy path, nothing claimed
    ("kilo", "4.2", False),    # below 4.3 the client sends request_spec/filter_properties (4.0)
])
def test_pinned_conductor_versions(nova, seeded, placement, instance_uuids, pinned_api, level, version, claims):
    api = pinned_api(level)
    assert api.client.version_cap == version
    flavor = H.make_flavor()
    uuids = instance_uuids(1)
    spec = H.make_spec(nova.ctxt, flavor, uuids)

    result = api.select_destinations(nova.ctxt, spec, uuids)

    assert_legacy_dicts(seeded, result, 1)
    alloc = placement.allocations(uuids[0])["allocations"]
    if claims:
        chosen = [u for u, s in seeded.items() if s["host"] == result[0]["host"]]
        assert set(alloc) == set(chosen), alloc
        assert alloc[chosen[0]]["resources"] == H.flavor_resources(flavor)
    else:
        assert alloc == {}, f"RPC {version} must not claim: {alloc}"


def test_pinned_conductor_cannot_ask_for_objects(nova, pinned_api):
    """nova's own client refuses Selection objects below 4.5, before anything is sent."""
    from nova import exception

    api = pinned_api("pike")
    spec = H.make_spec(nova.ctxt, H.make_flavor(), [H.new_uuid()])
    with pytest.raises(exception.SelectionObjectsWithOldRPCVersionNotSupported):
        api.select_destinations(nova.ctxt, spec, [spec.instance_uuid], return_objects=True)


def test_aggregate_casts_change_the_next_answer(nova, seeded, placement):
    """update_aggregates (nova-api's fanout cast) puts every host in an aggregate with an
    availability zone: the next Selection reports it without any database change; after
    delete_aggregate it is back to the default zone."""
    from nova import objects

    flavor = H.make_flavor()
    default_az = nova.conf.default_availability_zone
    assert H.zone_of_next_selection(nova, placement, flavor) == default_az
    hosts = sorted({s["host"] for s in seeded.values()})
    agg = objects.Aggregate(id=424242, uuid=H.new_uuid(), name="nsrs-cast-zone", hosts=hosts,
                            metadata={"availability_zone": "castzone"})
    nova.api.update_aggregates(nova.admin_ctxt, [agg])
    try:
        assert H.wait_for_zone(nova, placement, "castzone", flavor=flavor) == "castzone"
    finally:
        nova.api.delete_aggregate(nova.admin_ctxt, agg)
    assert H.wait_for_zone(nova, placement, default_az, flavor=flavor) == default_az
