"""Servers booted and moved by the real nova control plane (nova-api,
nova-conductor, nova-compute with the fake driver, Placement) through the
scheduler under test. Each test asserts the host chosen, the states nova
reaches, fault messages and Placement's allocations; the `nova` fixture then
checks that nothing is left allocated (conftest.py).
"""

import os

import pytest
import requests

import cp_helpers as H


@pytest.fixture
def small(flavors):
    return flavors["cp.small"]


def boot_active(nova, flavor, **kw):
    sid = nova.boot(flavor["id"], **kw)
    return nova.wait_status(sid, "ACTIVE")


def test_the_scheduler_runs_as_the_clouds_release():
    """Every service here is one nova release's own; nova-scheduler-rs joined after its
    conductor and says it schedules as that release (nova_release = auto)."""
    H.assert_runs_as_this_release((H.CP_STATE / "scheduler-cmd").read_text().split(),
                                  (H.CP_STATE / "logs" / "scheduler.log").read_text(errors="replace"))


def test_boot(nova, placement, computes, small):
    s = boot_active(nova, small)
    assert H.host_of(s) in computes
    assert s["OS-EXT-AZ:availability_zone"] == "nova"
    H.assert_allocated_on(placement, s, H.host_of(s), small)
    consumer = placement.get(f"/allocations/{s['id']}")
    assert consumer["project_id"] == H.PROJECT_ID and consumer["user_id"] == H.USER_ID


def test_boot_skips_disabled_computes(nova, placement, computes, small):
    """Two of three compute services disabled through the API: the server must land on the third."""
    enabled = sorted(computes)[1]
    disabled = [h for h in computes if h != enabled]
    try:
        for h in disabled:
            assert nova.set_service(h, status="disabled", disabled_reason="cp test")["status"] == "disabled"
        s = boot_active(nova, small)
        assert H.host_of(s) == enabled
        H.assert_allocated_on(placement, s, enabled, small)
    finally:
        H.enable_computes(nova, placement, computes, disabled)


def test_multi_create_spreads(nova, placement, computes, small):
    """min_count = max_count = 3 on three empty, equal computes: nova's default weighers
    (RAM, CPU, disk: spread) put one server on each."""
    ids = nova.boot(small["id"], min_count=3, max_count=3, return_reservation_id=True)
    assert len(ids) == 3
    servers = [nova.wait_status(i, "ACTIVE") for i in ids]
    hosts = sorted(H.host_of(s) for s in servers)
    assert hosts == sorted(computes), f"3 servers on {hosts}"
    for s in servers:
        H.assert_allocated_on(placement, s, H.host_of(s), small)


def test_multi_create_min_count_not_met(nova, small, flavors):
    """max_count 3 but min_count 2 of a flavor nothing fits: the whole request fails."""
    ids = nova.boot(flavors["cp.too-big"]["id"], min_count=2, max_count=3, return_reservation_id=True)
    assert len(ids) == 3
    for i in ids:
        s = nova.wait_status(i, "ERROR")
        assert H.NO_VALID_HOST in s["fault"]["message"]
        assert H.host_of(s) is None


def _group(nova, policy):
    return nova.post("/os-server-groups", {"server_group": {"name": f"cp-{policy}", "policy": policy}},
                     microversion="2.64")["server_group"]


def test_server_group_affinity(nova, placement, small):
    group = _group(nova, "affinity")
    try:
        first = boot_active(nova, small, scheduler_hints={"group": group["id"]})
        # Two more in one request, then one alone: all on the first one's host, though spreading
        # weighers would prefer the empty computes.
        more = nova.boot(small["id"], min_count=2, max_count=2, return_reservation_id=True,
                         scheduler_hints={"group": group["id"]})
        last = boot_active(nova, small, scheduler_hints={"group": group["id"]})
        servers = [first, last] + [nova.wait_status(i, "ACTIVE") for i in more]
        assert {H.host_of(s) for s in servers} == {H.host_of(first)}
        for s in servers:
            H.assert_allocated_on(placement, s, H.host_of(first), small)
        members = nova.get(f"/os-server-groups/{group['id']}")["server_group"]["members"]
        assert sorted(members) == sorted(s["id"] for s in servers)
    finally:
        for sid in nova.created_servers:
            nova.delete_server(sid)
        nova.delete(f"/os-server-groups/{group['id']}")


def test_server_group_anti_affinity(nova, placement, computes, small):
    group = _group(nova, "anti-affinity")
    try:
        ids = nova.boot(small["id"], min_count=2, max_count=2, return_reservation_id=True,
                        scheduler_hints={"group": group["id"]})
        # The third is asked for once the pair is on its hosts: before that
        # nova-conductor tells the scheduler of no member's host (nova's own
        # scheduler then races the same way), and a reschedule takes the
        # alternates without filtering again.
        pair = [nova.wait_status(i, "ACTIVE") for i in ids]
        third = boot_active(nova, small, scheduler_hints={"group": group["id"]})
        servers = pair + [third]
        assert sorted(H.host_of(s) for s in servers) == sorted(computes)
        for s in servers:
            H.assert_allocated_on(placement, s, H.host_of(s), small)
        # A fourth member has no compute left.
        fourth = nova.wait_status(nova.boot(small["id"], scheduler_hints={"group": group["id"]}), "ERROR")
        assert H.NO_VALID_HOST in fourth["fault"]["message"]
        assert H.host_of(fourth) is None
    finally:
        for sid in nova.created_servers:
            nova.delete_server(sid)
        nova.delete(f"/os-server-groups/{group['id']}")


def test_availability_zone(nova, placement, computes, small):
    """An aggregate with an availability zone, made through the API (nova-api mirrors it into
    Placement): servers asking for the zone land on its only host, even a second one that the
    spreading weighers would send elsewhere."""
    zone_host = sorted(computes)[2]
    agg = nova.post("/os-aggregates", {"aggregate": {"name": "cp-agg", "availability_zone": "cp-az"}})["aggregate"]
    try:
        nova.post(f"/os-aggregates/{agg['id']}/action", {"add_host": {"host": zone_host}})
        assert agg["uuid"] in H.wait_for(
            "the aggregate on the zone host's provider",
            lambda: agg["uuid"] in placement.aggregates(computes[zone_host]) and [agg["uuid"]])
        zones = {z["zoneName"] for z in nova.get("/os-availability-zone")["availabilityZoneInfo"]}
        assert {"cp-az", "nova"} <= zones
        servers = [boot_active(nova, small, availability_zone="cp-az") for _ in range(2)]
        for s in servers:
            assert H.host_of(s) == zone_host
            assert s["OS-EXT-AZ:availability_zone"] == "cp-az"
            H.assert_allocated_on(placement, s, zone_host, small)
        # And a server for the default zone does not go there.
        other = boot_active(nova, small, availability_zone="nova")
        assert H.host_of(other) != zone_host
    finally:
        for sid in nova.created_servers:
            nova.delete_server(sid)
        try:
            nova.post(f"/os-aggregates/{agg['id']}/action", {"remove_host": {"host": zone_host}})
        finally:
            nova.delete(f"/os-aggregates/{agg['id']}")


def test_no_valid_host(nova, placement, flavors):
    s = nova.wait_status(nova.boot(flavors["cp.too-big"]["id"]), "ERROR")
    assert H.NO_VALID_HOST in s["fault"]["message"], s["fault"]
    assert H.host_of(s) is None
    assert placement.allocations(s["id"]) == {}


def _migration(nova, server_id, kind):
    migs = [m for m in nova.migrations(server_id) if m["migration_type"] == kind]
    assert len(migs) == 1, f"{kind} migrations of {server_id}: {migs}"
    return migs[0]


def test_cold_migrate_then_resize(nova, placement, computes, flavors, small):
    medium = flavors["cp.medium"]
    s = boot_active(nova, small)
    src = H.host_of(s)
    nova.action(s["id"], {"migrate": None})
    s = nova.wait_status(s["id"], "VERIFY_RESIZE")
    dst = H.host_of(s)
    assert dst in computes and dst != src
    # While it waits for confirmation the source keeps its share under the migration's uuid.
    mig = _migration(nova, s["id"], "migration")
    assert (mig["source_compute"], mig["dest_compute"]) == (src, dst)
    H.assert_allocated_on(placement, s, dst, small)
    assert H.allocation_trees(placement, mig["uuid"]) == {src: H.flavor_resources(small)}
    nova.action(s["id"], {"confirmResize": None})
    s = nova.wait_status(s["id"], "ACTIVE")
    assert H.host_of(s) == dst
    H.wait_for("the migration's allocation to go", lambda: placement.allocations(mig["uuid"]) == {})
    H.assert_allocated_on(placement, s, dst, small)

    # Resize to a bigger flavor: another host again (allow_resize_to_same_host is off).
    nova.action(s["id"], {"resize": {"flavorRef": medium["id"]}})
    s = nova.wait_status(s["id"], "VERIFY_RESIZE")
    dst2 = H.host_of(s)
    assert dst2 in computes and dst2 != dst
    assert s["flavor"]["original_name"] == medium["name"]
    resize = _migration(nova, s["id"], "resize")
    H.assert_allocated_on(placement, s, dst2, medium)
    assert H.allocation_trees(placement, resize["uuid"]) == {dst: H.flavor_resources(small)}
    nova.action(s["id"], {"confirmResize": None})
    s = nova.wait_status(s["id"], "ACTIVE")
    assert H.host_of(s) == dst2
    H.wait_for("the resize's allocation to go", lambda: placement.allocations(resize["uuid"]) == {})
    H.assert_allocated_on(placement, s, dst2, medium)


def test_live_migration(nova, placement, computes, small):
    s = boot_active(nova, small)
    src = H.host_of(s)
    nova.action(s["id"], {"os-migrateLive": {"host": None, "block_migration": "auto"}})
    H.wait_for("the live migration to finish",
               lambda: [m for m in nova.migrations(s["id"])
                        if m["migration_type"] == "live-migration" and m["status"] in ("completed", "error", "failed")])
    mig = _migration(nova, s["id"], "live-migration")
    assert mig["status"] == "completed", mig
    s = nova.wait_status(s["id"], "ACTIVE")
    dst = H.host_of(s)
    assert dst in computes and dst != src
    assert (mig["source_compute"], mig["dest_compute"]) == (src, dst)
    H.wait_for("the migration's allocation to go", lambda: placement.allocations(mig["uuid"]) == {})
    H.assert_allocated_on(placement, s, dst, small)

    # Again, to a named host: the scheduler is asked about that host only (requested_destination).
    target = next(h for h in sorted(computes) if h not in (src, dst))
    nova.action(s["id"], {"os-migrateLive": {"host": target, "block_migration": "auto"}})
    H.wait_for("the second live migration to finish",
               lambda: [m for m in nova.migrations(s["id"]) if m["migration_type"] == "live-migration"
                        and m["dest_compute"] == target and m["status"] in ("completed", "error", "failed")])
    s = nova.wait_status(s["id"], "ACTIVE")
    assert H.host_of(s) == target
    H.wait_for("the migrations' allocations to go",
               lambda: all(placement.allocations(m["uuid"]) == {} for m in nova.migrations(s["id"])))
    H.assert_allocated_on(placement, s, target, small)


def test_shelve_offload_unshelve(nova, placement, endpoints, small):
    def snapshots():  # the shelve snapshot nova-api asked Glance (the stand-in) to create
        images = requests.get(f"{endpoints['glance']}/v2/images", timeout=10).json()["images"]
        return [i for i in images if i["name"] == f"{s['name']}-shelved"]

    s = boot_active(nova, small)
    nova.action(s["id"], {"shelve": None})
    nova.wait_status(s["id"], "SHELVED_OFFLOADED")
    # nova-compute sets SHELVED_OFFLOADED, then frees the host's resources, then clears
    # the host in a second save: the host goes a moment after the state.
    s = H.wait_for("the offloaded server to leave its host",
                   lambda: (lambda v: v if H.host_of(v) is None else None)(nova.server(s["id"])))
    assert s["status"] == "SHELVED_OFFLOADED"
    assert placement.allocations(s["id"]) == {}, "an offloaded server keeps no allocation"
    assert len(snapshots()) == 1
    nova.action(s["id"], {"unshelve": None})
    s = nova.wait_status(s["id"], "ACTIVE")
    assert H.host_of(s)
    H.assert_allocated_on(placement, s, H.host_of(s), small)
    # nova-compute deletes the snapshot once the server runs again.
    H.wait_for("the shelve snapshot to be deleted", lambda: not snapshots())


def test_evacuate(nova, placement, computes, small):
    """The source compute stops and is forced down through the API; evacuate rebuilds the
    server elsewhere. nova keeps the source's share of the allocation until the source compute
    starts again and cleans up after the evacuation."""
    s = boot_active(nova, small)
    src = H.host_of(s)
    H.control("stop-compute", src)
    try:
        assert nova.set_service(src, forced_down=True)["forced_down"] is True
        assert nova.compute_services()[src]["state"] == "down"
        nova.action(s["id"], {"evacuate": {}})
        # nova-compute makes the server ACTIVE a moment before it moves it to its new host
        # and marks the migration done: wait for the migration.
        H.wait_for("the evacuation to finish",
                   lambda: [m for m in nova.migrations(s["id"]) if m["migration_type"] == "evacuation"
                            and m["status"] in ("done", "failed", "error")], timeout=120)
        mig = _migration(nova, s["id"], "evacuation")
        assert mig["status"] == "done", mig
        s = nova.wait_status(s["id"], "ACTIVE")
        dst = H.host_of(s)
        assert dst in computes and dst != src
        assert (mig["source_compute"], mig["dest_compute"]) == (src, dst)
        trees = H.allocation_trees(placement, s["id"])
        assert trees == {src: H.flavor_resources(small), dst: H.flavor_resources(small)}, trees
    finally:
        H.control("start-compute", src)
        nova.set_service(src, forced_down=False)
    H.wait_for("the source's allocation to be cleaned up",
               lambda: set(H.allocation_trees(placement, s["id"])) == {dst})
    H.assert_allocated_on(placement, s, dst, small)
    H.wait_for(f"{src} to be up again", lambda: nova.compute_services()[src]["state"] == "up")


def test_reschedule_to_alternate(nova, placement, computes, endpoints, small):
    """The first build attempt fails on whichever compute gets it; nova-conductor retries on an
    alternate host the scheduler returned with its first answer."""
    s = nova.wait_status(nova.boot(small["id"], metadata={"nsrs_fail_first_build": "yes"}), "ACTIVE")
    marker = os.path.join(endpoints["markers"], s["id"])
    assert os.path.exists(marker), "the fake driver did not fail the first build attempt"
    failed_on = open(marker).read().strip()
    assert failed_on in computes
    assert H.host_of(s) in computes and H.host_of(s) != failed_on
    H.assert_allocated_on(placement, s, H.host_of(s), small)
    actions = nova.get(f"/servers/{s['id']}/os-instance-actions")["instanceActions"]
    create = [a for a in actions if a["action"] == "create"]
    assert len(create) == 1
    events = nova.get(f"/servers/{s['id']}/os-instance-actions/{create[0]['request_id']}")["instanceAction"]["events"]
    # One build on each host (a rescheduled build does not count as an error in the event).
    builds = [e for e in events if e["event"] == "compute__do_build_and_run_instance"]
    assert sorted(e["host"] for e in builds) == sorted([failed_on, H.host_of(s)]), builds
    # A successful build on the failed host clears its failed-build count, so the
    # BuildFailureWeigher does not shun it in later tests.
    again = nova.wait_status(nova.boot(small["id"], host=failed_on, microversion="2.74"), "ACTIVE")
    assert H.host_of(again) == failed_on
