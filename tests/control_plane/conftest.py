"""Fixtures for the control-plane tests.

Prerequisite: `scripts/control_plane.sh up` (nova-api, nova-conductor, three
nova-compute services with the fake driver, Placement, the scheduler under
test); `scripts/control_plane.sh test` does up, pytest, down.

Every test gets `nova`, a compute API client; when the test ends, whatever it
passed or failed, each server it created that still exists must hold
allocations on exactly one provider tree (its host's; none when shelved
offloaded or never scheduled), then all of them are deleted and no allocation
may be left: not theirs, and none on any compute node's provider (migration
records' allocations included). The run ends with the same check over every
server the run created.
"""

import pytest

import cp_helpers as H

FLAVORS = {
    # name: (vcpus, ram MB, disk GB). The fake driver reports 1000 vCPU, 800,000 MB, 600,000 GB.
    "cp.small": (1, 256, 1),
    "cp.medium": (2, 512, 2),
    "cp.too-big": (2000, 256, 1),  # 2000 vCPU > max_unit and capacity (1000 x 4.0): nothing fits
}


def pytest_report_header(config):
    try:
        return f"scheduler under test: {H.endpoints()['scheduler']}"
    except RuntimeError as e:
        return str(e)


@pytest.fixture(scope="session")
def endpoints():
    return H.endpoints()


@pytest.fixture(scope="session")
def placement(endpoints):
    return H.Placement(endpoints["placement"])


@pytest.fixture(scope="session")
def computes(endpoints, placement):
    """{compute host: its resource provider uuid} (the fake driver names the node after the host)."""
    by_name = {rp["name"]: rp["uuid"] for rp in placement.providers().values()}
    missing = [h for h in endpoints["computes"] if h not in by_name]
    assert not missing, f"no resource provider for {missing} in Placement"
    return {h: by_name[h] for h in endpoints["computes"]}


@pytest.fixture(scope="session")
def admin(endpoints):
    """A client for the session's own set-up and final checks."""
    return H.ComputeAPI(endpoints["compute_api"])


@pytest.fixture(scope="session")
def flavors(admin):
    made = {}
    for name, (vcpus, ram, disk) in FLAVORS.items():
        f = admin.post("/flavors", {"flavor": {"name": name, "vcpus": vcpus, "ram": ram, "disk": disk}})
        made[name] = f["flavor"]
    yield made
    for f in made.values():
        admin.delete(f"/flavors/{f['id']}")


@pytest.fixture(scope="session")
def run_servers(admin, placement, computes):
    """Every server id the run created; at the end none is left, nor any allocation."""
    created = []
    yield created
    left = [s["id"] for s in admin.servers()]
    assert not left, f"servers left at the end of the run: {left}"
    leftovers = {c: placement.allocations(c) for c in created}
    leftovers = {c: a for c, a in leftovers.items() if a}
    assert not leftovers, f"allocations left for deleted servers at the end of the run: {leftovers}"
    for host, rp in computes.items():
        allocs = placement.provider_allocations(rp)
        assert not allocs, f"allocations left on {host}'s provider at the end of the run: {allocs}"


@pytest.fixture
def nova(endpoints, placement, computes, run_servers):
    client = H.ComputeAPI(endpoints["compute_api"])
    yield client
    run_servers.extend(client.created_servers)
    problems = []
    # Servers still there: exactly one provider tree, their host's.
    for sid in client.created_servers:
        try:
            s = client.server(sid)
        except H.ApiError as e:
            if e.status == 404:
                continue
            raise
        trees = H.allocation_trees(placement, sid)
        unplaced = s["status"] == "SHELVED_OFFLOADED" or not H.host_of(s)
        expected_trees = set() if unplaced else {H.host_of(s)}
        if set(trees) != expected_trees:
            problems.append(f"server {sid} ({s['status']} on {H.host_of(s)}) has allocations on "
                            f"provider trees {sorted(trees)}, expected {sorted(expected_trees)}")
    for sid in client.created_servers:
        client.delete_server(sid, wait=False)
    for sid in client.created_servers:
        H.wait_for(f"server {sid} to be deleted", lambda sid=sid: client._gone(sid))
    # nova-compute deletes a server's allocations just after the server row: allow it a moment.
    def leftovers():
        left = [f"deleted server {sid} still has allocations {a}"
                for sid in client.created_servers if (a := placement.allocations(sid))]
        left += [f"allocations left on {host}'s provider after the test: {a}"
                 for host, rp in computes.items() if (a := placement.provider_allocations(rp))]
        return left
    try:
        H.wait_for("no allocations left", lambda: not leftovers(), timeout=20)
    except AssertionError:
        problems += leftovers()
    assert not problems, "\n".join(problems)
