"""The questions the scheduler asks Placement during select_destinations, as
Placement itself logged them (its gunicorn access log, in the format
scripts/stack.sh sets: request line, status, microversion header).

The side-by-side benchmark compares latencies "asking Placement the same
questions nova asks"; this is the test that shows they are the same. Each
scenario is one select_destinations call through nova's own RPC client. In
every run the questions must follow nova 34's protocol, as
nova/scheduler/manager.py and nova/scheduler/client/report.py make it:

- one GET /allocation_candidates per call;
- for each instance, in instance order, until one finds no host: per host
  tried, GET /allocations/{uuid} (the consumer generation the claim builds
  on), then PUT /allocations/{uuid}, refused (409) when Placement finds the
  host full, which sends nova to the next host, until one is made (204);
- when an instance finds no host after others were claimed, DELETE
  /allocations/{uuid} of each of those (_cleanup_allocations, force=True);
- nothing else, except what nova-scheduler-rs's read-ahead
  ([nova_scheduler_rs] read_allocations_ahead) does by design: it reads the
  instances' allocations while the candidates question is out, so a call that
  ends before every claim may carry a GET of instances never tried. The
  reference run asserts it has none.

The reference run (NSRS_SCHEDULER_CMD=nova, which .ci/run does first) keeps the
questions it saw in <state>/placement-questions.json; a run of another
scheduler on the same seeded cloud must then ask the very same ones: the same
query parameters, microversions and answers' status codes, the read-ahead's
extra GETs aside. Without that file the comparison is skipped (after the checks
above), unless NSRS_PLACEMENT_REFERENCE=required (.ci/run), which fails then.
"""

import collections
import hashlib
import json
import os
import sys
import time
import urllib.parse

import pytest

import nsrs_helpers as H

sys.path.insert(0, str(H.REPO / "scripts"))
import seed_cloud  # noqa: E402

pytestmark = pytest.mark.usefixtures("scheduler")

ACCESS_LOG = H.PLACEMENT_ACCESS_LOG
REFERENCE = H.STATE / "placement-questions.json"

Question = collections.namedtuple("Question", "method path query microversion status")


def is_reference_run():
    return os.environ.get("NSRS_SCHEDULER_CMD", "").strip() == "nova"


def allocations_of(i):
    return f"/allocations/{{instance {i}}}"


def show(questions):
    lines = []
    for q in questions:
        query = "&".join(f"{k}={v}" for k, v in q.query)
        lines.append(f"  {q.method} {q.path}{'?' + query if query else ''} "
                     f"[{q.microversion}] -> {q.status}")
    return "\n".join(lines) or "  (none)"


class AccessLog:
    """What Placement logs from now on, but the tests' own requests."""

    def __init__(self):
        if not ACCESS_LOG.exists():
            pytest.fail(f"{ACCESS_LOG} not found: is Placement the one scripts/stack.sh started?")
        self.offset = ACCESS_LOG.stat().st_size

    def questions(self, instance_uuids, settle=0.3, timeout=5.0):
        """The requests logged since, once the log has stopped growing (gunicorn
        writes a line after the answer went out), instance uuids in paths named
        by their index in the request."""
        deadline = time.monotonic() + timeout
        size = -1
        while (now := ACCESS_LOG.stat().st_size) != size and time.monotonic() < deadline:
            size = now
            time.sleep(settle)
        with open(ACCESS_LOG, "rb") as f:
            f.seek(self.offset)
            text = f.read().decode(errors="replace")
        names = {u: f"{{instance {i}}}" for i, u in enumerate(instance_uuids)}
        out = []
        for line in text.splitlines():
            m = H.PLACEMENT_ACCESS_LINE.match(line)
            assert m, f"an access log line not in scripts/stack.sh's format: {line!r}"
            if m["agent"] == H.HELPER_USER_AGENT:
                continue
            uri = urllib.parse.urlsplit(m["uri"])
            path = "/".join(names.get(seg, seg) for seg in urllib.parse.unquote(uri.path).split("/"))
            # Placement reads parameters by name, so their order is no difference.
            query = tuple(sorted(urllib.parse.parse_qsl(uri.query, keep_blank_values=True)))
            out.append(Question(m["method"], path, query, m["microversion"], int(m["status"])))
        return out


def check_protocol(questions, n, claimed, released, candidate_questions=1):
    """Fails unless `questions` are nova's protocol for a call of n instances of
    which `claimed` were claimed (the others had no host: the first of them
    may have tried hosts whose claim was refused), and `released` released
    again. `candidate_questions` is 2 where nova asks again after an empty
    answer (dedicated CPUs: PCPU first, then VCPU). Returns the read-ahead's
    extra GETs (of instances never tried)."""
    seen = f"the questions asked:\n{show(questions)}"
    accounted = set()

    candidates = [k for k, q in enumerate(questions) if q.path == "/allocation_candidates"]
    assert len(candidates) == candidate_questions, \
        f"{candidate_questions} GET /allocation_candidates per call; {seen}"
    assert all((questions[k].method, questions[k].status) == ("GET", 200) for k in candidates), seen
    first_claim = min((k for k, q in enumerate(questions) if q.method == "PUT"), default=len(questions))
    assert max(candidates) < first_claim, f"a claim before the last candidates question; {seen}"
    accounted |= set(candidates)

    # A claim attempt is a GET of the instance's allocations and a PUT built on
    # it; a refused PUT (409) moves on to the next host, which reads again.
    # Instances are claimed in order; after the first that finds no host, none
    # is tried.
    tried = []
    for i in range(n):
        attempts = [(k, q) for k, q in enumerate(questions)
                    if q.path == allocations_of(i) and q.method in ("GET", "PUT")]
        puts = [q.status for _, q in attempts if q.method == "PUT"]
        if i in claimed:
            assert puts and puts[-1] == 204 and set(puts[:-1]) <= {409}, \
                f"instance {i}: claims refused (409) until one is made (204); {seen}"
        else:
            assert set(puts) <= {409}, f"instance {i} was not to be claimed; {seen}"
        if not puts:
            continue
        assert [q.method for _, q in attempts] == ["GET", "PUT"] * len(puts), \
            f"instance {i}: each claim attempt reads the allocations, then PUTs; {seen}"
        assert all(q.status == 200 for _, q in attempts if q.method == "GET"), seen
        tried.append(i)
        accounted |= {k for k, _ in attempts}
    assert tried == sorted(tried) and tried[:len(claimed)] == list(claimed) \
        and len(tried) <= len(claimed) + 1, f"instances tried: {tried}; {seen}"
    puts_in_order = [questions[k].path for k in sorted(accounted) if questions[k].method == "PUT"]
    assert puts_in_order == sorted(puts_in_order, key=lambda p: int(p.split()[-1][:-1])), \
        f"an instance's claim came before the one of an instance before it; {seen}"

    deletes = [k for k, q in enumerate(questions) if q.method == "DELETE"]
    assert [questions[k].path for k in deletes] == [allocations_of(i) for i in released], \
        f"one DELETE /allocations per released instance {list(released)}, in order; {seen}"
    last_put = max((k for k in accounted if questions[k].method == "PUT"), default=-1)
    assert all(questions[k].status == 204 and k > last_put for k in deletes), seen
    accounted |= set(deletes)

    extras = [q for k, q in enumerate(questions) if k not in accounted]
    never_tried = {allocations_of(i) for i in range(n) if i not in tried}
    for q in extras:
        assert q.method == "GET" and q.path in never_tried and q.status == 200, \
            f"a question nova does not ask: {show([q])}; {seen}"
    assert len({q.path for q in extras}) == len(extras), f"an instance's allocations read twice; {seen}"
    return extras


def cloud_fingerprint():
    return hashlib.sha256(H.CLOUD_JSON.read_bytes()).hexdigest()


def keep_reference(scenario, questions):
    saved = {}
    if REFERENCE.exists():
        saved = json.loads(REFERENCE.read_text())
    if saved.get("cloud") != cloud_fingerprint():
        saved = {"cloud": cloud_fingerprint(), "scenarios": {}}
    saved["scenarios"][scenario] = [q._asdict() for q in questions]
    REFERENCE.write_text(json.dumps(saved, indent=1, sort_keys=True))


def reference_for(scenario):
    """nova-scheduler's questions for this scenario on this cloud, or None."""
    if not REFERENCE.exists():
        return None
    saved = json.loads(REFERENCE.read_text())
    if saved.get("cloud") != cloud_fingerprint() or scenario not in saved["scenarios"]:
        return None
    return [Question(q["method"], q["path"], tuple(tuple(p) for p in q["query"]),
                     q["microversion"], q["status"])
            for q in saved["scenarios"][scenario]]


# --- the scenarios ---------------------------------------------------------

Scenario = collections.namedtuple(
    "Scenario", "flavor n change outcome candidate_questions check", defaults=(1, None))
Scenario.__doc__ = """flavor, instance count, a change to the RequestSpec, the
outcome ("placed", "no host": NoValidHost before any claim, "rolled back": two
claimed, the third finds no host), how many GET /allocation_candidates nova
asks, and a check of the answer (the Selections) where the scenario has one."""


def live_enabled(seeded):
    return sorted((h for h in seeded.values() if h["up"] and not h["disabled"]),
                  key=lambda h: h["host"])


def with_image_trait(spec):
    from nova import objects
    image = dict(H.IMAGE, properties=dict(H.IMAGE["properties"],
                                          **{"trait:COMPUTE_SECURITY_TPM_2_0": "required"}))
    spec.image = objects.ImageMeta.from_dict(image)


def to_destination(seeded):
    def change(spec):
        from nova import objects
        h = live_enabled(seeded)[0]
        spec.requested_destination = objects.Destination(host=h["host"], node=h["nodename"])
    return change


def in_zone(az):
    def change(spec):
        spec.availability_zone = az
    return change


def flavor_with(**extra_specs):
    flavor = H.make_flavor()
    flavor.extra_specs = dict(flavor.extra_specs, **extra_specs)
    return flavor


def placed_if(seeded, trait):
    return "placed" if any(trait in h["traits"] for h in live_enabled(seeded)) else "no host"


def scenario(name, request, seeded):
    same = lambda spec: None  # noqa: E731
    if name == "one instance":
        return Scenario(H.make_flavor(), 1, same, "placed")
    if name == "three instances":
        return Scenario(H.make_flavor(), 3, same, "placed")
    if name == "boot from volume":
        def bfv(spec):
            spec.is_bfv = True
        return Scenario(H.make_flavor(), 1, bfv, "placed")
    if name == "flavor traits":
        flavor = flavor_with(**{"trait:HW_CPU_X86_AVX2": "required",
                                "trait:HW_CPU_X86_AVX512F": "forbidden"})
        return Scenario(flavor, 1, same, "placed" if any(
            "HW_CPU_X86_AVX2" in h["traits"] and "HW_CPU_X86_AVX512F" not in h["traits"]
            for h in live_enabled(seeded)) else "no host")
    if name == "image trait":
        return Scenario(H.make_flavor(), 1, with_image_trait,
                        placed_if(seeded, "COMPUTE_SECURITY_TPM_2_0"))
    if name == "requested destination":
        return Scenario(H.make_flavor(), 1, to_destination(seeded), "placed")
    if name == "more vCPUs than any host":
        return Scenario(H.make_flavor(vcpus=100000, memory_mb=4096, root_gb=20), 1, same, "no host")
    if name == "the third of three fits nowhere":
        flavor, _ = request.getfixturevalue("big_flavor")
        return Scenario(flavor, 3, same, "rolled back")
    if name == "availability zone":
        # map_az_to_placement_aggregate: member_of the zone's aggregates.
        zone = request.getfixturevalue("questions_zone")

        def on_zone_hosts(selections):
            chosen = {s.compute_node_uuid for alts in selections for s in alts}
            assert chosen <= zone["providers"], \
                f"hosts outside zone {zone['name']}: {chosen - zone['providers']}"
        return Scenario(H.make_flavor(), 2, in_zone(zone["name"]), "placed", check=on_zone_hosts)
    if name == "a zone no aggregate names":
        # The same request filter adds nothing when no aggregate has the zone.
        return Scenario(H.make_flavor(), 1, in_zone("nsrs-zone-of-no-aggregate"), "placed")
    if name == "dedicated CPUs":
        # hw:cpu_policy=dedicated asks for PCPU; no seeded host has any, and nova
        # asks again with VCPU when that answer is empty.
        return Scenario(flavor_with(**{"hw:cpu_policy": "dedicated"}), 1, same, "placed",
                        candidate_questions=2)
    if name == "granular groups":
        # A resource override and a numbered group with a group policy.
        flavor = flavor_with(**{"resources:VCPU": "1", "resources1:MEMORY_MB": "512",
                                "group_policy": "isolate"})
        return Scenario(flavor, 1, same, "placed")
    if name == "computes mid-upgrade":
        # A rolling upgrade: one compute still at the previous release's service
        # version. nova 34 then leaves OWNER_NOVA out of the question (its request
        # filter needs every compute at 73 or more); older releases have no such gate.
        request.getfixturevalue("mid_upgrade")
        return Scenario(H.make_flavor(), 1, same, "placed")
    if name == "packed virtqueues":
        # hw:virtio_packed_ring adds a required trait (packed_virtqueue_filter).
        return Scenario(flavor_with(**{"hw:virtio_packed_ring": "true"}), 1, same,
                        placed_if(seeded, "COMPUTE_NET_VIRTIO_PACKED"))
    raise AssertionError(name)


SCENARIOS = ["one instance", "three instances", "boot from volume", "flavor traits",
             "image trait", "requested destination", "more vCPUs than any host",
             "the third of three fits nowhere", "availability zone", "a zone no aggregate names",
             "dedicated CPUs", "granular groups", "packed virtqueues", "computes mid-upgrade"]


@pytest.fixture(scope="module")
def mid_upgrade(conf, seeded):
    """One live compute's services row set to the previous release's service version
    (its nova-compute not yet upgraded), put back afterwards. The schedulers read the
    minimum compute version per request (nova) or within two host-state refreshes."""
    host = live_enabled(seeded)[-1]
    previous = H.previous_service_version()
    url = H.CloudDB(conf).cells()[host["cell_uuid"]][1]
    conn = H.connect(url)
    sql = "UPDATE services SET version = %s WHERE host = %s AND `binary` = 'nova-compute' AND deleted = 0"
    with conn.cursor() as cur:
        cur.execute("SELECT version FROM services WHERE host = %s AND `binary` = 'nova-compute' AND deleted = 0",
                    (host["host"],))
        (own,) = cur.fetchone()
        cur.execute(sql, (previous, host["host"]))
    time.sleep(3)
    try:
        yield {"host": host["host"], "version": previous}
    finally:
        with conn.cursor() as cur:
            cur.execute(sql, (own, host["host"]))
        conn.close()
        time.sleep(3)


@pytest.fixture(scope="module")
def seeded_with_traits(placement, seeded):
    """The seeded hosts with their Placement traits (the seeder's, as Placement has them)."""
    return {u: dict(h, traits=set(placement.get(f"/resource_providers/{u}/traits")["traits"]))
            for u, h in seeded.items()}


ZONE = "nsrs-questions-zone"
# Fixed, so that the reference run and the run under test ask about the same
# aggregate (its uuid is in the question).
ZONE_AGGREGATE_UUID = "7d3f2a9c-51e4-4b8a-9c0d-2e6f1a8b4c53"


def set_provider_aggregate(placement, rp_uuid, agg_uuid, member):
    """Put the provider in (or out of) the aggregate, keeping its others, as
    nova's report client does (PUT with the provider generation, again on 409)."""
    url = f"{placement.url}/resource_providers/{rp_uuid}/aggregates"
    for _ in range(5):
        r = placement.s.get(url, timeout=30)
        r.raise_for_status()
        body = r.json()
        now = set(body["aggregates"])
        want = now | {agg_uuid} if member else now - {agg_uuid}
        if want == now:
            return
        r = placement.s.put(url, json={"aggregates": sorted(want),
                                       "resource_provider_generation": body["resource_provider_generation"]},
                            timeout=30)
        if r.status_code != 409:
            r.raise_for_status()
            return
    raise AssertionError(f"provider {rp_uuid}: aggregates kept changing under the test")


@pytest.fixture(scope="module")
def questions_zone(nova, conf, placement, seeded):
    """An availability zone as nova-api makes it (`openstack aggregate create
    --zone`, `aggregate add host`): a host aggregate with availability_zone
    metadata in the API database, mirrored into Placement under the same uuid,
    announced to the schedulers by the update_aggregates cast. It holds every
    other live, enabled host. Undone the same way afterwards (delete_aggregate)."""
    from nova import objects

    hosts = live_enabled(seeded)[::2]
    api = H.connect(conf["api_database"]["connection"])

    def undo_rows():
        with api.cursor() as cur:
            cur.execute("SELECT id FROM aggregates WHERE uuid = %s", (ZONE_AGGREGATE_UUID,))
            for (agg_id,) in cur.fetchall():
                cur.execute("DELETE FROM aggregate_hosts WHERE aggregate_id = %s", (agg_id,))
                cur.execute("DELETE FROM aggregate_metadata WHERE aggregate_id = %s", (agg_id,))
                cur.execute("DELETE FROM aggregates WHERE id = %s", (agg_id,))

    def undo_providers():
        for h in seeded.values():
            set_provider_aggregate(placement, h["uuid"], ZONE_AGGREGATE_UUID, member=False)

    # What an interrupted earlier run may have left.
    undo_rows()
    undo_providers()
    # The rows as the seeder writes its zones (scripts/seed_cloud.py).
    seed_cloud.write_aggregates(conf["api_database"]["connection"], [{
        "uuid": ZONE_AGGREGATE_UUID, "name": ZONE, "metadata": {"availability_zone": ZONE},
        "hosts": [h["host"] for h in hosts]}], H.utcnow())
    with api.cursor() as cur:
        cur.execute("SELECT id FROM aggregates WHERE uuid = %s", (ZONE_AGGREGATE_UUID,))
        (agg_id,) = cur.fetchone()
    for h in hosts:
        set_provider_aggregate(placement, h["uuid"], ZONE_AGGREGATE_UUID, member=True)
    agg = objects.Aggregate(id=agg_id, uuid=ZONE_AGGREGATE_UUID, name=ZONE,
                            hosts=[h["host"] for h in hosts], metadata={"availability_zone": ZONE})
    nova.api.update_aggregates(nova.admin_ctxt, [agg])
    try:
        got = H.wait_for_zone(nova, placement, ZONE, host=hosts[0])
        assert got == ZONE, f"{hosts[0]['host']}: the scheduler reports zone {got!r} after the cast"
        yield {"name": ZONE, "providers": {h["uuid"] for h in hosts}}
    finally:
        undo_providers()
        undo_rows()
        nova.api.delete_aggregate(nova.admin_ctxt, agg)
        default = nova.conf.default_availability_zone
        got = H.wait_for_zone(nova, placement, default, host=hosts[0])
        api.close()
        assert got == default, f"{hosts[0]['host']}: zone {got!r} after delete_aggregate"


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_questions_nova_asks(name, request, nova, seeded_with_traits, instance_uuids):
    from nova import exception

    sc = scenario(name, request, seeded_with_traits)
    uuids = instance_uuids(sc.n)
    spec = H.make_spec(nova.ctxt, sc.flavor, uuids)
    sc.change(spec)

    log = AccessLog()
    if sc.outcome == "placed":
        result = nova.api.select_destinations(nova.ctxt, spec, uuids,
                                              return_objects=True, return_alternates=True)
        assert len(result) == sc.n
        if sc.check:
            sc.check(result)
        claimed, released = range(sc.n), []
    else:
        with pytest.raises(exception.NoValidHost):
            nova.api.select_destinations(nova.ctxt, spec, uuids,
                                         return_objects=True, return_alternates=True)
        claimed = released = [] if sc.outcome == "no host" else [0, 1]
    questions = log.questions(uuids)
    gate = H.owner_trait_min_compute_version()
    if name == "computes mid-upgrade" and gate is not None:
        upgrade = request.getfixturevalue("mid_upgrade")
        assert upgrade["version"] < gate, upgrade
        roots = [v for q in questions if q.path == "/allocation_candidates"
                 for k, v in q.query if k == "root_required"]
        assert roots and all("OWNER_NOVA" not in r.split(",") for r in roots), (
            f"OWNER_NOVA asked for with {upgrade['host']} at version {upgrade['version']}: {roots}")

    extras = check_protocol(questions, sc.n, claimed, released, sc.candidate_questions)
    asked = [q for q in questions if q not in extras]
    if is_reference_run():
        assert not extras, f"nova-scheduler read allocations it did not claim:\n{show(extras)}"
        keep_reference(name, asked)
        return
    reference = reference_for(name)
    if reference is None:
        why = (f"no questions of the reference run for {name!r} on this cloud in {REFERENCE} "
               "(run NSRS_SCHEDULER_CMD=nova scripts/conformance.sh first)")
        if os.environ.get("NSRS_PLACEMENT_REFERENCE") == "required":
            pytest.fail(why)
        pytest.skip(f"nova's protocol checked; {why}")
    assert sorted(asked) == sorted(reference), (
        f"not the questions nova-scheduler asked.\nnova-scheduler:\n{show(reference)}\n"
        f"this scheduler (read-ahead aside):\n{show(asked)}")
    # The read-ahead's extra reads are nova's read too: same microversion.
    reads = {q.microversion for other in SCENARIOS for q in reference_for(other) or []
             if q.method == "GET" and q.path.startswith("/allocations/")}
    assert reads, f"no GET /allocations in the reference run's questions ({REFERENCE})"
    assert {q.microversion for q in extras} <= reads, (
        f"read-ahead GETs not at nova's microversion {sorted(reads)}:\n{show(extras)}")
