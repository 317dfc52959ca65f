"""select_destinations through nova's own RPC client, against the scheduler
under test, on the seeded cloud (RabbitMQ, MariaDB with nova's schema,
Placement). Every expectation here holds for the real nova-scheduler 34 too:
run with NSRS_SCHEDULER_CMD=nova to check the tests themselves.

Flavors are derived from the seeded cloud where a test needs a particular fit,
so the tests hold for any seed of scripts/seed_cloud.py that has the roles
they need (they skip, saying why, when the cloud lacks one).
"""

import json
import time

import pytest

import nsrs_helpers as H

pytestmark = pytest.mark.usefixtures("scheduler")


def select(nova, spec, uuids, return_objects=True, return_alternates=True, ctxt=None):
    return nova.api.select_destinations(ctxt or nova.ctxt, spec, uuids,
                                        return_objects=return_objects,
                                        return_alternates=return_alternates)


def assert_selection_lists(nova, seeded, result, n):
    from nova import objects

    assert isinstance(result, list) and len(result) == n, result
    for sels in result:
        assert isinstance(sels, list) and 1 <= len(sels) <= nova.max_attempts, sels
        for s in sels:
            assert isinstance(s, objects.Selection), type(s)
            node = seeded.get(s.compute_node_uuid)
            assert node is not None, f"{s.compute_node_uuid} is no seeded compute node"
            assert (s.service_host, s.nodename, s.cell_uuid) == (
                node["host"], node["nodename"], node["cell_uuid"])
            assert node["up"] and not node["disabled"], f"{node['host']} is down or disabled"
            assert s.availability_zone == nova.conf.default_availability_zone
            assert s.limits is not None and s.limits.to_dict() == {}
        first, alts = sels[0], sels[1:]
        assert first.allocation_request_version == "1.36"
        assert len({s.service_host for s in sels}) == len(sels), "duplicate hosts in one list"
        assert all(a.cell_uuid == first.cell_uuid for a in alts), "alternate in another cell"
    chosen = [sels[0].service_host for sels in result]
    for sels in result:
        assert not {a.service_host for a in sels[1:]} & set(chosen), \
            "an alternate is one of the request's selected hosts"


def assert_claimed(placement, nova, flavor, uuid, selection):
    alloc = placement.allocations(uuid)
    assert set(alloc["allocations"]) == {selection.compute_node_uuid}, alloc
    assert alloc["allocations"][selection.compute_node_uuid]["resources"] == H.flavor_resources(flavor)
    assert (alloc["project_id"], alloc["user_id"]) == (nova.ctxt.project_id, nova.ctxt.user_id)
    # The Selection carries the allocation request that was claimed.
    req = json.loads(selection.allocation_request)
    assert req["allocations"][selection.compute_node_uuid]["resources"] == H.flavor_resources(flavor)


def assert_no_allocations(placement, uuids):
    for u in uuids:
        assert placement.allocations(u)["allocations"] == {}, f"allocation left for {u}"


def test_single_instance(nova, seeded, placement, instance_uuids):
    flavor = H.make_flavor()
    uuids = instance_uuids(1)
    model = H.WeighModel(seeded, placement.candidates(flavor), flavor, nova.multipliers)

    result = select(nova, H.make_spec(nova.ctxt, flavor, uuids), uuids)

    assert_selection_lists(nova, seeded, result, 1)
    sels = result[0]
    assert_claimed(placement, nova, flavor, uuids[0], sels[0])
    # The best weighed host wins (nova's default weighers; see WeighModel).
    picks, weights = model.acceptable_picks()
    assert sels[0].compute_node_uuid in picks, (
        f"chose {sels[0].service_host} ({weights[sels[0].compute_node_uuid]:.4f}); "
        f"best: {sorted(seeded[u]['host'] for u in picks)} ({weights[next(iter(picks))]:.4f})")
    # Alternates: the next best hosts of the same cell, as many as max_attempts - 1 allows.
    problems, left = model.check_alternates(
        sels[0].compute_node_uuid, [sels[0].compute_node_uuid],
        [s.compute_node_uuid for s in sels[1:]])
    assert not problems, problems
    assert len(sels) - 1 == min(nova.max_attempts - 1, len(sels) - 1 + len(left))


def test_legacy_dicts_without_objects(nova, seeded, placement, instance_uuids):
    flavor = H.make_flavor()
    uuids = instance_uuids(1)

    result = select(nova, H.make_spec(nova.ctxt, flavor, uuids), uuids,
                    return_objects=False, return_alternates=False)

    assert isinstance(result, list) and len(result) == 1, result
    d = result[0]
    assert isinstance(d, dict) and set(d) == {"host", "nodename", "limits"}, d
    assert d["limits"] == {}
    node = next(h for h in seeded.values() if h["host"] == d["host"])
    assert d["nodename"] == node["nodename"] and node["up"] and not node["disabled"]
    alloc = placement.allocations(uuids[0])["allocations"]
    assert set(alloc) == {node["uuid"]}, "the legacy path still claims in Placement"


def test_no_valid_host_is_raised_quickly(nova, placement, instance_uuids):
    from nova import exception

    flavor = H.make_flavor(vcpus=100000, memory_mb=4096, root_gb=20)
    uuids = instance_uuids(1)
    t0 = time.monotonic()
    with pytest.raises(exception.NoValidHost) as err:
        select(nova, H.make_spec(nova.ctxt, flavor, uuids), uuids)
    elapsed = time.monotonic() - t0
    assert elapsed < 20, f"NoValidHost took {elapsed:.1f}s"
    assert "No valid host was found." in str(err.value)
    assert_no_allocations(placement, uuids)


def test_three_instances_consume_in_request(nova, seeded, placement, instance_uuids):
    """Each pick is the best weighed host *after* the previous picks were
    consumed. With the default multipliers (RAM/CPU/Disk 1.0, IoOps -1.0) the
    weigher that alone tells the second pick from the first is the in-request
    consumption: the first pick's num_io_ops becomes 1 (normalized 1.0, weight
    -1) and its free RAM/disk/vCPU drop, so a scheduler that forgot to consume
    would pick the same host again. The test asserts, per step, that the model
    no longer allows the previous pick and that the daemon picked one the
    model allows."""
    flavor = H.make_flavor()
    uuids = instance_uuids(3)
    model = H.WeighModel(seeded, placement.candidates(flavor), flavor, nova.multipliers)

    result = select(nova, H.make_spec(nova.ctxt, flavor, uuids), uuids)

    assert_selection_lists(nova, seeded, result, 3)
    chosen = [sels[0].compute_node_uuid for sels in result]
    assert len(set(chosen)) == 3, [seeded[u]["host"] for u in chosen]
    for i, (uuid, sels) in enumerate(zip(uuids, result)):
        picks, weights = model.acceptable_picks()
        if i > 0:
            assert chosen[i - 1] not in picks, "scenario: consumption must change the best host"
        assert chosen[i] in picks, (
            f"instance {i}: chose {seeded[chosen[i]]['host']} ({weights[chosen[i]]:.4f}), "
            f"model: {sorted(seeded[u]['host'] for u in picks)} ({weights[next(iter(picks))]:.4f})")
        model.consume(chosen[i])
        assert_claimed(placement, nova, flavor, uuid, sels[0])
    # Alternates come from one more weighing after all three were consumed.
    for sels in result:
        problems, left = model.check_alternates(
            sels[0].compute_node_uuid, chosen, [s.compute_node_uuid for s in sels[1:]])
        assert not problems, problems
        assert len(sels) - 1 == min(nova.max_attempts - 1, len(sels) - 1 + len(left))


def test_two_big_instances_land_on_the_two_big_hosts(nova, seeded, placement, instance_uuids,
                                                     big_flavor):
    flavor, big_hosts = big_flavor
    uuids = instance_uuids(2)

    result = select(nova, H.make_spec(nova.ctxt, flavor, uuids), uuids)

    assert_selection_lists(nova, seeded, result, 2)
    assert {sels[0].service_host for sels in result} == big_hosts
    for uuid, sels in zip(uuids, result):
        assert_claimed(placement, nova, flavor, uuid, sels[0])


def test_last_instance_not_fitting_rolls_back_every_claim(nova, placement, instance_uuids,
                                                          big_flavor):
    """Three instances of a flavor only two hosts can hold (one each): the first
    two are claimed, the third finds nothing, and nova deletes the two claims
    before raising NoValidHost."""
    from nova import exception

    flavor, _ = big_flavor
    uuids = instance_uuids(3)
    t0 = time.monotonic()
    with pytest.raises(exception.NoValidHost) as err:
        select(nova, H.make_spec(nova.ctxt, flavor, uuids), uuids)
    assert time.monotonic() - t0 < 20
    assert "There are not enough hosts available." in str(err.value)
    assert_no_allocations(placement, uuids)


def test_disabled_and_down_hosts_are_never_chosen(nova, seeded, placement, instance_uuids):
    bait = [h for h in seeded.values() if h["disabled"] or not h["up"]]
    if not bait:
        pytest.skip("the seeded cloud has no disabled or down host")
    bait_names = {h["host"] for h in bait}
    flavor = H.make_flavor()
    seen = set()
    for n in (1, 4):
        uuids = instance_uuids(n)
        result = select(nova, H.make_spec(nova.ctxt, flavor, uuids), uuids)
        assert_selection_lists(nova, seeded, result, n)
        seen |= {s.service_host for sels in result for s in sels}
    assert not seen & bait_names, f"chose disabled/down hosts {sorted(seen & bait_names)}"


def test_flavor_only_disabled_or_down_hosts_could_hold(nova, seeded, placement, instance_uuids):
    """The seeder makes disabled and down hosts the largest of the cloud: a
    flavor bigger than every live enabled host but smaller than a bait host
    must get NoValidHost, not a disabled or dead host."""
    from nova import exception

    live = [H.ram_capacity(h, placement) for h in seeded.values() if h["up"] and not h["disabled"]]
    bait = [H.ram_capacity(h, placement) for h in seeded.values() if h["disabled"] or not h["up"]]
    if not bait or max(bait) <= max(live) + 1024:
        pytest.skip("the seeded cloud has no disabled/down host larger than the live ones")
    flavor = H.make_flavor(vcpus=2, memory_mb=max(live) + 1024, root_gb=20)
    uuids = instance_uuids(1)
    with pytest.raises(exception.NoValidHost):
        select(nova, H.make_spec(nova.ctxt, flavor, uuids), uuids)
    assert_no_allocations(placement, uuids)
