"""Helpers for the conformance tests: the stack's config, direct reads of the
cell databases and Placement, RequestSpec building (as nova-api/conductor
build it), and a small model of nova's default weighing used as the oracle for
which host must be chosen.

Nothing here talks to the scheduler under test; tests do that through nova's
own RPC client (nova.scheduler.rpcapi.SchedulerAPI).
"""

import configparser
import datetime
import importlib.metadata
import json
import os
import re
import time
import urllib.parse
import uuid
from pathlib import Path

import pymysql
import requests

REPO = Path(__file__).resolve().parents[2]
STATE = Path(os.environ.get("NSRS_STATE") or REPO / ".stack")
NOVA_CONF = STATE / "nova.conf"
CLOUD_JSON = STATE / "cloud.json"
CELL0_UUID = "00000000-0000-0000-0000-000000000000"
# The nova whose client and objects this run uses: the stack's venv (NSRS_RELEASE
# picks an older release's own).
NOVA_VERSION_STRING = importlib.metadata.version("nova")
NOVA_VERSION = tuple(int(p) for p in NOVA_VERSION_STRING.split(".")[:3] if p.isdigit())
# Each release's facts as read from its own code (data/nova-releases/, written by
# scripts/release_facts.sh), by nova major version.
RELEASE_FACTS = {int(f["nova"].split(".")[0]): f for f in (
    json.loads(p.read_text()) for p in (REPO / "data" / "nova-releases").glob("*.json"))}
NEWEST_NOVA_MAJOR = max(RELEASE_FACTS)
PLACEMENT_MICROVERSION = "placement 1.36"
# The ids nova-conductor would carry for one user; any ids work.
PROJECT_ID = "c0c0c0c0c0c04c0c8c0c0c0c0c0c0c01"
USER_ID = "d0d0d0d0d0d04d0d8d0d0d0d0d0d0d01"
# The tests' own Placement requests say so, to be told apart in Placement's access log.
HELPER_USER_AGENT = "nsrs-conformance-helper"
SERVICE_DOWN_TIME = 60  # nova's default [DEFAULT] service_down_time
PLACEMENT_ACCESS_LOG = STATE / "logs" / "placement-access.log"
# One line of it, in scripts/stack.sh's PLACEMENT_ACCESS_FORMAT:
#   %(h)s %(t)s "%(r)s" %(s)s %(b)s %(L)s "%(a)s" "%({openstack-api-version}i)s"
PLACEMENT_ACCESS_LINE = re.compile(
    r'^\S+ \[[^\]]*\] "(?P<method>[A-Z]+) (?P<uri>\S+) [^"]*" (?P<status>\d{3}) \S+ '
    r'(?P<seconds>[0-9.]+) "(?P<agent>[^"]*)" "(?P<microversion>[^"]*)"$')


def queue_consumers(transport_url, queue="scheduler"):
    """Consumers on a queue of the broker/vhost named by an oslo.messaging
    rabbit:// transport URL (a passive declare; 0 if the queue does not exist)."""
    import amqp

    u = urllib.parse.urlsplit(transport_url.split(",")[0])
    conn = amqp.Connection(host=f"{u.hostname or '127.0.0.1'}:{u.port or 5672}",
                           userid=urllib.parse.unquote(u.username or "guest"),
                           password=urllib.parse.unquote(u.password or "guest"),
                           virtual_host=urllib.parse.unquote(u.path[1:]) or "/",
                           connect_timeout=10)
    conn.connect()
    try:
        try:
            return conn.channel().queue_declare(queue, passive=True).consumer_count
        except amqp.exceptions.NotFound:
            return 0
    finally:
        try:
            conn.close()
        except Exception:
            pass


def init_nova_client(conf_path=NOVA_CONF):
    """nova's client side as nova-conductor has it: config parsed, objects
    registered, RPC initialised. Returns nova.conf.CONF."""
    import nova.conf
    import nova.config
    import nova.objects

    nova.objects.register_all()
    nova.config.parse_args(["nsrs", "--config-file", str(conf_path)], configure_db=False)
    return nova.conf.CONF


def user_context():
    """What nova-conductor forwards to the scheduler: the user's own context."""
    import nova.context
    return nova.context.RequestContext(
        user_id=USER_ID, project_id=PROJECT_ID, roles=["member", "reader"],
        is_admin=False, user_name="conformance", project_name="conformance")


def read_conf(path=NOVA_CONF):
    cp = configparser.ConfigParser(interpolation=None, strict=False)
    if not cp.read(path):
        raise FileNotFoundError(f"{path} not found: run scripts/stack.sh up first")
    return cp


def connect(url):
    u = urllib.parse.urlsplit(url)
    return pymysql.connect(
        host=u.hostname or "127.0.0.1", port=u.port or 3306,
        user=urllib.parse.unquote(u.username or "root"),
        password=urllib.parse.unquote(u.password or ""),
        database=u.path.lstrip("/"), charset="utf8", autocommit=True)


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class CloudDB:
    """Read-only view of the seeded cloud as nova's databases hold it."""

    def __init__(self, conf):
        self.api_url = conf["api_database"]["connection"]

    def cells(self):
        """{cell_uuid: (name, database_connection)} without cell0."""
        conn = connect(self.api_url)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT uuid, name, database_connection FROM cell_mappings"
                            " WHERE uuid != %s", (CELL0_UUID,))
                return {u: (n, c) for u, n, c in cur.fetchall()}
        finally:
            conn.close()

    def host_states(self):
        """One dict per live compute node, with the fields nova's HostState takes
        from compute_nodes and services (as nova/scheduler/host_manager.py reads them)."""
        now = utcnow()
        out = {}
        for cell_uuid, (cell_name, url) in self.cells().items():
            conn = connect(url)
            try:
                with conn.cursor(pymysql.cursors.DictCursor) as cur:
                    cur.execute(
                        "SELECT cn.uuid, cn.host, cn.hypervisor_hostname, cn.vcpus, cn.vcpus_used,"
                        " cn.memory_mb, cn.free_ram_mb, cn.free_disk_gb, cn.disk_available_least,"
                        " cn.cpu_allocation_ratio, cn.stats, s.disabled, s.forced_down,"
                        " s.last_seen_up FROM compute_nodes cn JOIN services s"
                        " ON s.host = cn.host AND s.`binary` = 'nova-compute' AND s.deleted = 0"
                        " WHERE cn.deleted = 0")
                    rows = cur.fetchall()
            finally:
                conn.close()
            for r in rows:
                stats = json.loads(r["stats"] or "{}")
                free_disk_gb = r["free_disk_gb"]
                if r["disk_available_least"] is not None:
                    free_disk_gb = min(free_disk_gb, r["disk_available_least"])
                seen = r["last_seen_up"]
                out[r["uuid"]] = {
                    "uuid": r["uuid"],
                    "host": r["host"],
                    "nodename": r["hypervisor_hostname"],
                    "cell_uuid": cell_uuid,
                    "cell": cell_name,
                    "vcpus_total": r["vcpus"],
                    "vcpus_used": r["vcpus_used"],
                    "cpu_allocation_ratio": r["cpu_allocation_ratio"],
                    "free_ram_mb": r["free_ram_mb"],
                    "free_disk_mb": free_disk_gb * 1024,
                    "num_io_ops": int(stats.get("io_workload", 0)),
                    "disabled": bool(r["disabled"]),
                    "up": (not r["forced_down"] and seen is not None
                           and abs((now - seen).total_seconds()) <= SERVICE_DOWN_TIME),
                    "last_seen_up": seen,
                }
        return out


class Placement:
    def __init__(self, conf):
        self.url = (conf["placement"].get("endpoint_override") or "http://127.0.0.1:8778").rstrip("/")
        self.s = requests.Session()
        self.s.headers.update({"User-Agent": HELPER_USER_AGENT,
                               "X-Auth-Token": conf["placement"].get("token", "admin"),
                               "OpenStack-API-Version": PLACEMENT_MICROVERSION,
                               "Accept": "application/json"})

    def get(self, path, **params):
        r = self.s.get(self.url + path, params=params, timeout=30)
        r.raise_for_status()
        return r.json()

    def allocations(self, consumer):
        """{"allocations": {rp_uuid: {"resources": {...}, "generation": g}}, "project_id", ...}"""
        return self.get(f"/allocations/{consumer}")

    def delete_allocations(self, consumer):
        r = self.s.delete(f"{self.url}/allocations/{consumer}", timeout=30)
        if r.status_code not in (204, 404):
            r.raise_for_status()

    def candidates(self, flavor):
        """Placement's provider summaries for nova's query for this flavor:
        {rp_uuid: {rc: {"capacity", "used"}}} (root_required as nova 34 sends it)."""
        body = self.get("/allocation_candidates", resources=resources_query(flavor),
                        root_required="OWNER_NOVA,!COMPUTE_STATUS_DISABLED", limit=1000)
        return {rp: summary["resources"] for rp, summary in body["provider_summaries"].items()}


def ram_capacity(h, placement):
    """The MEMORY_MB a host can hold in all, by its Placement inventory."""
    inv = placement.get(f"/resource_providers/{h['uuid']}/inventories")["inventories"]["MEMORY_MB"]
    return int((inv["total"] - inv["reserved"]) * inv["allocation_ratio"])


def flavor_resources(flavor):
    return {"VCPU": flavor.vcpus, "MEMORY_MB": flavor.memory_mb,
            "DISK_GB": flavor.root_gb + flavor.ephemeral_gb}


def resources_query(flavor):
    return ",".join(f"{rc}:{n}" for rc, n in sorted(flavor_resources(flavor).items()) if n)


# --- building what nova-conductor sends ---------------------------------------

def make_flavor(vcpus=2, memory_mb=4096, root_gb=20, name=None, flavor_id=2):
    from nova import objects
    name = name or f"conformance.{vcpus}-{memory_mb}-{root_gb}"
    return objects.Flavor(
        id=flavor_id, name=name, flavorid=name, vcpus=vcpus, memory_mb=memory_mb,
        root_gb=root_gb, ephemeral_gb=0, swap=0, rxtx_factor=1.0, vcpu_weight=0,
        disabled=False, is_public=True, extra_specs={"hw:cpu_policy": "shared"},
        description=None)


IMAGE = {
    "id": "e0e0e0e0-e0e0-4e0e-8e0e-e0e0e0e0e001",
    "name": "cirros-0.6.2-x86_64-disk",
    "status": "active",
    "visibility": "public",
    "checksum": "c8fc807773e5354afe61636071771906",
    "owner": "f0f0f0f0f0f04f0f8f0f0f0f0f0f0f01",
    "size": 21430272,
    "container_format": "bare",
    "disk_format": "qcow2",
    "created_at": datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc),
    "updated_at": datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc),
    "min_ram": 0,
    "min_disk": 0,
    "properties": {"hw_disk_bus": "virtio", "hw_vif_model": "virtio"},
}


def make_spec(ctxt, flavor, instance_uuids, scheduler_hints=None, image=None):
    """A RequestSpec as nova-api builds it (RequestSpec.from_components) and
    nova-conductor sends it to select_destinations (compare
    src/rpc/testdata/single_instance.request.json)."""
    from nova import objects
    spec = objects.RequestSpec.from_components(
        ctxt, instance_uuids[0], dict(image or IMAGE), flavor,
        numa_topology=None, pci_requests=None,
        filter_properties={"scheduler_hints": scheduler_hints or {}},
        instance_group=None, availability_zone=None,
        security_groups=objects.SecurityGroupList(objects=[]),
        project_id=ctxt.project_id or PROJECT_ID, user_id=ctxt.user_id or USER_ID,
        request_level_params=objects.RequestLevelParams())
    spec.num_instances = len(instance_uuids)
    spec.is_bfv = False
    spec.requested_networks = objects.NetworkRequestList(objects=[])
    spec.id = 1  # set by RequestSpec.create() in nova-api; the scheduler never saves it
    spec.obj_reset_changes(recursive=False)
    return spec


def zone_of_next_selection(nova, placement, flavor=None, host=None):
    """The availability zone the scheduler reports in the Selection of a new
    1-instance request (on `host`, a seeded host dict, when given); its claim is
    released at once."""
    from nova import objects
    instance = new_uuid()
    spec = make_spec(nova.ctxt, flavor or make_flavor(), [instance])
    if host is not None:
        spec.requested_destination = objects.Destination(host=host["host"], node=host["nodename"])
    try:
        sels = nova.api.select_destinations(nova.ctxt, spec, [instance],
                                            return_objects=True, return_alternates=False)
        return sels[0][0].availability_zone
    finally:
        placement.delete_allocations(instance)


def wait_for_zone(nova, placement, want, seconds=20, **where):
    """Asks (zone_of_next_selection) until the zone is `want` or `seconds` have
    passed (a cast is handled asynchronously); returns the last zone seen."""
    deadline = time.monotonic() + seconds
    while (got := zone_of_next_selection(nova, placement, **where)) != want \
            and time.monotonic() < deadline:
        time.sleep(0.3)
    return got


def new_uuid():
    return str(uuid.uuid4())


# --- the oracle: nova 34's default weighing with in-request consumption -------

class WeighModel:
    """nova's weigh step for the default weighers and this cloud.

    Only RAMWeigher, CPUWeigher, DiskWeigher and IoOpsWeigher can tell the
    seeded hosts apart: every host has the same hypervisor_version, no PCI
    devices, no metrics, no failed builds, no server group and the request is
    not a move, so the other default weighers give every host the same raw
    value, which nova's normalization turns into 0. RAM/CPU/Disk/IoOps all have
    minval = 0, so a raw value v normalizes to max(v, 0) / max(all), and 0 for
    all hosts when that max is 0. Weight = sum(multiplier * normalized).

    Consumption (nova's HostState.consume_from_request) after each pick:
    free_ram_mb -= memory_mb, free_disk_mb -= (root_gb + ephemeral_gb) * 1024,
    vcpus_used += vcpus, num_io_ops += 1. Placement capacity is tracked too, so
    a host whose claim would fail is skipped as nova's claim loop skips it.
    """

    EPS = 1e-9

    def __init__(self, host_states, candidates, flavor, multipliers):
        self.flavor = flavor
        self.m = multipliers
        self.hosts = {u: dict(h) for u, h in host_states.items()
                      if u in candidates and h["up"] and not h["disabled"]}
        self.placement = {u: {rc: dict(v) for rc, v in candidates[u].items()} for u in self.hosts}

    def weights(self):
        hs = list(self.hosts.values())
        if len(hs) <= 1:
            return {h["uuid"]: 0.0 for h in hs}
        raw = {
            "ram": [h["free_ram_mb"] for h in hs],
            "cpu": [h["vcpus_total"] * h["cpu_allocation_ratio"] - h["vcpus_used"] for h in hs],
            "disk": [h["free_disk_mb"] for h in hs],
            "io_ops": [h["num_io_ops"] for h in hs],
        }
        total = [0.0] * len(hs)
        for name, values in raw.items():
            values = [max(v, 0) for v in values]  # minval = 0
            top = max(values)
            if top == 0:
                continue
            for i, v in enumerate(values):
                total[i] += self.m[name] * (v / top)
        return {h["uuid"]: w for h, w in zip(hs, total)}

    def claimable(self, u):
        need = flavor_resources(self.flavor)
        return all(self.placement[u][rc]["used"] + n <= self.placement[u][rc]["capacity"]
                   for rc, n in need.items() if n)

    def acceptable_picks(self):
        """The hosts nova could pick next: the best weighed among those it could
        claim (all of them when several tie)."""
        w = self.weights()
        ok = [u for u in self.hosts if self.claimable(u)]
        if not ok:
            return set(), w
        best = max(w[u] for u in ok)
        return {u for u in ok if w[u] >= best - self.EPS}, w

    def consume(self, u):
        f = self.flavor
        h = self.hosts[u]
        h["free_ram_mb"] -= f.memory_mb
        h["free_disk_mb"] -= (f.root_gb + f.ephemeral_gb) * 1024
        h["vcpus_used"] += f.vcpus
        h["num_io_ops"] += 1
        for rc, n in flavor_resources(f).items():
            if n:
                self.placement[u][rc]["used"] += n

    def check_alternates(self, own, selected, alternates):
        """Alternates of the selected host `own` must be the next best hosts (by
        the current weights) in own's cell, excluding every host selected for
        the request, in order. Returns (problems, eligible hosts left over)."""
        w = self.weights()
        cell = self.hosts[own]["cell_uuid"] if own in self.hosts else None
        remaining = [u for u in self.hosts
                     if self.hosts[u]["cell_uuid"] == cell and u not in selected]
        problems = []
        for k, alt in enumerate(alternates):
            if alt not in remaining:
                problems.append(f"alternate {k + 1} {alt} is not an eligible host of the cell")
                continue
            best = max(w[u] for u in remaining)
            if w[alt] < best - self.EPS:
                problems.append(f"alternate {k + 1} has weight {w[alt]:.6f}, best left was {best:.6f}")
            remaining.remove(alt)
        return problems, remaining


# --- the release the stack runs ------------------------------------------------

def scheduled_as_line():
    """What nova-scheduler-rs logs at startup on a cloud of this run's nova release:
    nova_release = auto takes the oldest release with the cloud's service version
    (nova 30 shares 29's 67, so such a cloud reads as 2024.1), unless the stack names
    the release in nova.conf (NSRS_SCHEDULE_AS)."""
    named = os.environ.get("NSRS_SCHEDULE_AS")
    if named:
        major = next(m for m, f in RELEASE_FACTS.items() if f["series"] == named)
        return f"scheduling as nova {major} ({named}): [nova_scheduler_rs] nova_release"
    version = RELEASE_FACTS[NOVA_VERSION[0]]["service_version"]
    major = min(m for m, f in RELEASE_FACTS.items() if f["service_version"] == version)
    return f"scheduling as nova {major} ({RELEASE_FACTS[major]['series']})"


def previous_service_version():
    """The service version of the release before this run's (a compute not yet
    upgraded); below the oldest release known here, one less than its own."""
    major = NOVA_VERSION[0]
    if major - 1 in RELEASE_FACTS:
        return RELEASE_FACTS[major - 1]["service_version"]
    return RELEASE_FACTS[major]["service_version"] - 1


def owner_trait_min_compute_version():
    """The compute service version this release's OWNER_NOVA request filter needs from
    every compute (None: the release has no such filter)."""
    return RELEASE_FACTS[NOVA_VERSION[0]]["request_filter_min_compute_versions"].get(
        "MIN_COMPUTE_VERSION_OWNER_TRAIT")


def assert_runs_as_this_release(cmd, log):
    """The scheduler started as `cmd` (its log text `log`) runs as this run's release:
    the reference nova-scheduler is that release's own, nova-scheduler-rs says it
    schedules as it (nova_release = auto). With NSRS_RELEASE set, this run's nova must
    be that release's."""
    wanted = os.environ.get("NSRS_RELEASE")
    if wanted:
        assert RELEASE_FACTS[NOVA_VERSION[0]]["series"] == wanted, (
            f"NSRS_RELEASE={wanted} but the tests run nova {NOVA_VERSION_STRING}")
    if any(os.path.basename(t) == "nova-scheduler" for t in cmd):
        assert f"(version {NOVA_VERSION_STRING})" in log, "the reference is another nova release"
    else:
        assert scheduled_as_line() in log, f"no '{scheduled_as_line()}' in the scheduler's log"
