#!/usr/bin/env python3
"""Seed a test cloud that nova 34 accepts: compute services and nodes in the
cell databases plus the matching resource providers in Placement.

Run it with the stack's venv python after `scripts/stack.sh up` (or simply
`scripts/stack.sh seed ARGS`). The result is a function of the arguments and
--seed only (uuids included), so every run of the same command gives the same
cloud.

Per host (named cmp00001, cmp00002, ... (--name-prefix); spread round-robin over
the cells):
  * services row: binary nova-compute, topic compute, version = nova's
    SERVICE_VERSION, last_seen_up = now (kept fresh by compute_heartbeat.py);
  * compute_nodes row: uuid, hypervisor_hostname = host name, sizes, usage
    (memory_mb_used = reserved_host_memory_mb = 512, as nova-compute reports an
    empty host), allocation ratios, QEMU hypervisor, service_id;
  * a Placement resource provider with uuid = compute node uuid, name =
    hypervisor_hostname, VCPU / MEMORY_MB / DISK_GB inventories with the same
    allocation ratios, traits COMPUTE_NODE, OWNER_NOVA and a few capabilities.
Then `nova-manage cell_v2 discover_hosts` creates the host mappings.

Roles (chosen from --seed):
  * normal: 8-64 vCPU (cpu_allocation_ratio 4 or 16), 16-256 GiB RAM, 100-2000 GB disk;
  * big (--big-hosts): 96 vCPU, 384 GiB, 4000 GB: the only enabled, live hosts
    that can hold a flavor needing more than 256 GiB of RAM;
  * disabled (--disabled-hosts): services.disabled = 1 and the trait
    COMPUTE_STATUS_DISABLED (what nova-compute reports);
  * down (--down-hosts): last_seen_up an hour old and listed in
    <state>/stale-hosts.txt so the heartbeat leaves them down.
Disabled and down hosts are "bait": the largest hosts of the cloud (128 vCPU at
16x, 1 TiB RAM, 8000 GB disk), so a scheduler that ignored their state would
pick them first and be caught.

Optional variety for benchmarks (all off by default, so the default cloud the
conformance tests expect is unchanged; drawn from a second RNG derived from
--seed, so adding them never changes the hosts themselves):
  * --usage F: existing instances on enabled hosts, up to a fill of about F of
    the tightest resource (per host uniformly 0..2F, capped at 95%), flavors
    1..16 vCPU; written as `instances` rows in the cell database, as the usage
    fields and stats nova-compute reports (vcpus_used, memory_mb_used,
    free_ram_mb, running_vms, num_instances, num_proj_*, ...), and as
    allocations in Placement (POST /allocations, batches of hosts);
  * --azs K: K availability zones, each a nova host aggregate with metadata
    availability_zone=azN holding a share of the hosts;
  * --aggregates M: M more aggregates (no AZ) over random subsets of hosts;
    every aggregate is mirrored into Placement (same uuid) as nova does;
  * --direct-host-mappings: write host_mappings (and compute_nodes.mapped) in
    SQL, as discover_hosts would, instead of running nova-manage (minutes at
    tens of thousands of hosts);
  * --nested: provider trees as nova-compute and neutron report them, and shared
    disk: under each compute node provider a vGPU device (`<host>_pci_0000_81_00_0`,
    VGPU 2 or 4) and an Open vSwitch agent (`<host>:Open vSwitch agent`) whose
    bridge (`...:br-ex`) holds NET_BW_EGR/IGR_KILOBIT_PER_SEC with the traits
    CUSTOM_PHYSNET_PUBLIC and CUSTOM_VNIC_TYPE_NORMAL; DISK_GB leaves the compute
    nodes for one pool per 50 consecutive hosts (`shared-disk-N`, the sum of their
    local_gb, trait MISC_SHARES_VIA_AGGREGATE), shared through a Placement
    aggregate with those hosts. Existing instances then take their disk from
    the pool.
SQL goes in multi-row batches; Placement writes run --workers at a time.

Writes <state>/cloud.json (every host with its role, cell and sizes) and prints
a short JSON summary on stdout.
"""

import argparse
import concurrent.futures
import configparser
import datetime
import json
import os
import random
import subprocess
import sys
import time
import urllib.parse
import uuid
import warnings

os.environ.setdefault("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")

import os_traits  # noqa: E402
import pymysql  # noqa: E402
import requests  # noqa: E402

CELL0_UUID = "00000000-0000-0000-0000-000000000000"
PLACEMENT_VERSION = "placement 1.36"
RESERVED_HOST_MEMORY_MB = 512  # nova's [DEFAULT] reserved_host_memory_mb default
HYPERVISOR_VERSION = 8002002  # QEMU 8.2.2, the same on every host
BASE_TRAITS = [
    "COMPUTE_NODE",
    "OWNER_NOVA",
    "COMPUTE_IMAGE_TYPE_QCOW2",
    "COMPUTE_IMAGE_TYPE_RAW",
    "COMPUTE_NET_ATTACH_INTERFACE",
    "COMPUTE_NET_VIF_MODEL_VIRTIO",
    "COMPUTE_STORAGE_BUS_VIRTIO",
    "COMPUTE_VOLUME_ATTACH_WITH_TAG",
    "COMPUTE_VOLUME_EXTEND",
    "COMPUTE_DEVICE_TAGGING",
    "HW_CPU_X86_SSE42",
]
OPTIONAL_TRAITS = ["HW_CPU_X86_AVX2", "HW_CPU_X86_AVX512F", "COMPUTE_SECURITY_TPM_2_0"]
# Flavors of the pre-existing instances (vCPU, MiB, GB) and how often each is drawn.
INSTANCE_FLAVORS = [(1, 2048, 10), (2, 4096, 20), (4, 8192, 40), (8, 16384, 80), (16, 32768, 160)]
INSTANCE_FLAVOR_WEIGHTS = [30, 30, 20, 15, 5]
EXTRA_AGGREGATES = [("ssd", {"ssd": "true"}), ("gpu-ready", {"gpu": "true"}),
                    ("windows-licensed", {"os_distro": "windows"}), ("highmem", {"highmem": "true"}),
                    ("dedicated-tenant", {"filter_tenant_id": "c0c0c0c0c0c04c0c8c0c0c0c0c0c0c99"}),
                    ("maintenance-next", {"maintenance": "planned"})]
PCI_STATS_EMPTY = json.dumps({
    "nova_object.name": "PciDevicePoolList",
    "nova_object.namespace": "nova",
    "nova_object.version": "1.1",
    "nova_object.data": {"objects": []},
    "nova_object.changes": ["objects"],
})


def connect_args(url):
    u = urllib.parse.urlsplit(url)
    return dict(
        host=u.hostname or "127.0.0.1",
        port=u.port or 3306,
        user=urllib.parse.unquote(u.username or "root"),
        password=urllib.parse.unquote(u.password or ""),
        database=u.path.lstrip("/"),
        charset="utf8",
        autocommit=False,
    )


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None, microsecond=0)


def make_hosts(args, cells):
    """The cloud as plain dicts, a function of the arguments only."""
    rng = random.Random(args.seed)
    n = args.hosts
    special = args.big_hosts + args.disabled_hosts + args.down_hosts
    if special > n:
        sys.exit(f"--big-hosts + --disabled-hosts + --down-hosts = {special} > --hosts {n}")
    order = list(range(n))
    rng.shuffle(order)
    roles = ["normal"] * n
    for i in order[: args.big_hosts]:
        roles[i] = "big"
    for i in order[args.big_hosts: args.big_hosts + args.disabled_hosts]:
        roles[i] = "disabled"
    for i in order[args.big_hosts + args.disabled_hosts: special]:
        roles[i] = "down"

    hosts = []
    for i in range(n):
        role = roles[i]
        if role == "normal":
            vcpus = rng.choice(range(8, 65, 4))
            memory_mb = rng.choice(range(16, 257, 4)) * 1024
            local_gb = rng.randint(100, 2000)
            cpu_ratio = rng.choice([4.0, 16.0])
        elif role == "big":
            vcpus, memory_mb, local_gb, cpu_ratio = 96, 384 * 1024, 4000, 4.0
        else:  # disabled / down: bait, bigger than anything else
            vcpus, memory_mb, local_gb, cpu_ratio = 128, 1024 * 1024, 8000, 16.0
        cell = cells[i % len(cells)]
        traits = list(BASE_TRAITS) + [t for t in OPTIONAL_TRAITS if rng.random() < 0.5]
        if role == "disabled":
            traits.append("COMPUTE_STATUS_DISABLED")
        hosts.append({
            "name": f"{args.name_prefix}{i + 1:05d}",
            "role": role,
            "cell": cell["name"],
            "cell_uuid": cell["uuid"],
            "uuid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "service_uuid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "host_ip": f"198.18.{(i + 1) // 256}.{(i + 1) % 256}",
            "vcpus": vcpus,
            "memory_mb": memory_mb,
            "local_gb": local_gb,
            "reserved_host_memory_mb": RESERVED_HOST_MEMORY_MB,
            "cpu_allocation_ratio": cpu_ratio,
            "ram_allocation_ratio": 1.0,
            "disk_allocation_ratio": 1.0,
            "hypervisor_version": HYPERVISOR_VERSION,
            "disabled": role == "disabled",
            "down": role == "down",
            "traits": sorted(traits),
        })
    return hosts


def add_variety(args, hosts):
    """Instances, availability zones and aggregates (see the module doc). Drawn
    from an RNG of its own so the hosts of a seed never change. Returns
    (instances, aggregates); each host gets "instances", "used", "aggregates",
    "availability_zone"."""
    rng = random.Random(f"{args.seed}:variety")
    projects = [uuid.UUID(int=rng.getrandbits(128), version=4).hex for _ in range(40)]
    users = [uuid.UUID(int=rng.getrandbits(128), version=4).hex for _ in range(100)]
    instances = []
    for h in hosts:
        h["used"] = {"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0}
        h["instances"] = 0
        h["aggregates"] = []
        h["availability_zone"] = None
        # Bait hosts stay empty: they must remain the most attractive hosts.
        if args.usage <= 0 or h["role"] in ("disabled", "down"):
            continue
        capacity = {"VCPU": h["vcpus"] * h["cpu_allocation_ratio"],
                    "MEMORY_MB": (h["memory_mb"] - h["reserved_host_memory_mb"]) * h["ram_allocation_ratio"],
                    "DISK_GB": h["local_gb"] * h["disk_allocation_ratio"]}
        fill = min(0.95, rng.uniform(0, 2 * args.usage))
        # Placement refuses an allocation above an inventory's max_unit (the host's size).
        fits = [(f, w) for f, w in zip(INSTANCE_FLAVORS, INSTANCE_FLAVOR_WEIGHTS)
                if f[0] <= h["vcpus"] and f[1] <= h["memory_mb"] and f[2] <= h["local_gb"]]
        while fits:
            vcpus, mem, disk = rng.choices([f for f, _ in fits], [w for _, w in fits])[0]
            want = {"VCPU": vcpus, "MEMORY_MB": mem, "DISK_GB": disk}
            if any(h["used"][rc] + n > fill * capacity[rc] for rc, n in want.items()):
                break
            for rc, n in want.items():
                h["used"][rc] += n
            h["instances"] += 1
            instances.append({
                "uuid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "host": h["name"], "node_uuid": h["uuid"], "cell": h["cell"],
                "project_id": rng.choice(projects), "user_id": rng.choice(users),
                "vcpus": vcpus, "memory_mb": mem, "root_gb": disk,
            })

    aggregates = []
    for k in range(args.azs):
        aggregates.append({"name": f"az{k + 1}-hosts", "az": f"az{k + 1}",
                           "metadata": {"availability_zone": f"az{k + 1}"}, "hosts": []})
    for k in range(args.aggregates):
        name, metadata = EXTRA_AGGREGATES[k % len(EXTRA_AGGREGATES)]
        if k >= len(EXTRA_AGGREGATES):
            name = f"{name}-{k // len(EXTRA_AGGREGATES) + 1}"
        aggregates.append({"name": name, "az": None, "metadata": dict(metadata), "hosts": [],
                           "share": rng.uniform(0.05, 0.3)})
    for agg in aggregates:
        agg["uuid"] = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    az_aggs = [a for a in aggregates if a["az"]]
    for h in hosts:
        if az_aggs:
            agg = rng.choice(az_aggs)
            agg["hosts"].append(h["name"])
            h["aggregates"].append(agg["uuid"])
            h["availability_zone"] = agg["az"]
        for agg in aggregates:
            if agg["az"] is None and rng.random() < agg["share"]:
                agg["hosts"].append(h["name"])
                h["aggregates"].append(agg["uuid"])
    return instances, aggregates


NESTED_POOL_HOSTS = 50
NESTED_TRAITS = ("CUSTOM_PHYSNET_PUBLIC", "CUSTOM_VNIC_TYPE_NORMAL")


def add_trees(args, hosts, instances):
    """--nested (see the module doc): children under every host, DISK_GB pools
    shared via aggregate. Drawn from an RNG of its own. Returns the pools."""
    rng = random.Random(f"{args.seed}:nested")
    new = lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4))
    pools = []
    for start in range(0, len(hosts), NESTED_POOL_HOSTS):
        members = hosts[start:start + NESTED_POOL_HOSTS]
        pool = {"name": f"shared-disk-{len(pools) + 1}", "uuid": new(), "aggregate": new(),
                "disk_gb": sum(h["local_gb"] for h in members),
                "hosts": [h["name"] for h in members]}
        pools.append(pool)
        for h in members:
            h["pool"] = pool["uuid"]
            h["placement_aggregates"] = [pool["aggregate"]]
    by_name = {h["name"]: h for h in hosts}
    for inst in instances:
        inst["pool"] = by_name[inst["host"]]["pool"]
    for h in hosts:
        gpu = rng.choice([2, 4])
        agent = new()
        bandwidth = 10_000_000
        h["children"] = [
            {"name": f"{h['name']}_pci_0000_81_00_0", "uuid": new(), "parent": h["uuid"],
             "inventories": {"VGPU": dict(total=gpu, reserved=0, min_unit=1, max_unit=gpu,
                                          step_size=1, allocation_ratio=1.0)},
             "traits": []},
            {"name": f"{h['name']}:Open vSwitch agent", "uuid": agent, "parent": h["uuid"],
             "inventories": {}, "traits": []},
            {"name": f"{h['name']}:Open vSwitch agent:br-ex", "uuid": new(), "parent": agent,
             "inventories": {
                 rc: dict(total=bandwidth, reserved=0, min_unit=1, max_unit=bandwidth,
                          step_size=1, allocation_ratio=1.0)
                 for rc in ("NET_BW_EGR_KILOBIT_PER_SEC", "NET_BW_IGR_KILOBIT_PER_SEC")},
             "traits": list(NESTED_TRAITS)},
        ]
    return pools


def node_stats(h, instances_here):
    """compute_nodes.stats as nova-compute's resource tracker reports them."""
    stats = {"failed_builds": "0", "io_workload": "0", "num_instances": str(len(instances_here))}
    if instances_here:
        stats["num_vm_active"] = str(len(instances_here))
        stats["num_task_None"] = str(len(instances_here))
        stats["num_os_type_None"] = str(len(instances_here))
        per_project = {}
        for inst in instances_here:
            per_project[inst["project_id"]] = per_project.get(inst["project_id"], 0) + 1
        for p, n in sorted(per_project.items()):
            stats[f"num_proj_{p}"] = str(n)
    return json.dumps(stats)


def cpu_info(h):
    return json.dumps({
        "arch": "x86_64", "model": "Cascadelake-Server", "vendor": "Intel",
        "topology": {"cells": 1, "sockets": 1, "cores": h["vcpus"], "threads": 1},
        "features": ["sse4.2", "avx", "avx2"] if "HW_CPU_X86_AVX2" in h["traits"] else ["sse4.2", "avx"],
    })


def write_cell(cell_url, hosts, service_version, now, stale_time, instances_by_host):
    conn = pymysql.connect(**connect_args(cell_url))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM services WHERE `binary` = 'nova-compute' AND deleted = 0")
            if cur.fetchone()[0]:
                sys.exit("this cloud is already seeded; `scripts/stack.sh up` gives a fresh one")
            cur.executemany(
                "INSERT INTO services (created_at, updated_at, host, `binary`, topic, report_count,"
                " disabled, deleted, disabled_reason, last_seen_up, forced_down, version, uuid)"
                " VALUES (%s, %s, %s, 'nova-compute', 'compute', 1, %s, 0, %s, %s, 0, %s, %s)",
                [(now, stale_time if h["down"] else now, h["name"], int(h["disabled"]),
                  "seeded disabled" if h["disabled"] else None,
                  stale_time if h["down"] else now, service_version, h["service_uuid"])
                 for h in hosts])
            cur.execute("SELECT host, id FROM services WHERE `binary` = 'nova-compute' AND deleted = 0")
            service_ids = dict(cur.fetchall())
            rows = []
            for h in hosts:
                used = h.get("used") or {"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0}
                here = instances_by_host.get(h["name"], [])
                memory_mb_used = h["reserved_host_memory_mb"] + used["MEMORY_MB"]
                free_disk_gb = h["local_gb"] - used["DISK_GB"]
                rows.append((
                    now, now, service_ids[h["name"]], h["name"], h["uuid"],
                    h["vcpus"], h["memory_mb"], h["local_gb"], used["VCPU"], memory_mb_used,
                    used["DISK_GB"], h["hypervisor_version"], h["name"], cpu_info(h),
                    h["memory_mb"] - memory_mb_used, free_disk_gb, free_disk_gb, len(here),
                    h["host_ip"], json.dumps([["x86_64", "qemu", "hvm"], ["i686", "qemu", "hvm"]]),
                    PCI_STATS_EMPTY, node_stats(h, here),
                    h["cpu_allocation_ratio"], h["ram_allocation_ratio"], h["disk_allocation_ratio"]))
            cur.executemany(
                "INSERT INTO compute_nodes (created_at, updated_at, service_id, host, uuid,"
                " vcpus, memory_mb, local_gb, vcpus_used, memory_mb_used, local_gb_used,"
                " hypervisor_type, hypervisor_version, hypervisor_hostname, cpu_info,"
                " free_ram_mb, free_disk_gb, disk_available_least, current_workload, running_vms,"
                " host_ip, supported_instances, pci_stats, metrics, extra_resources, stats,"
                " numa_topology, cpu_allocation_ratio, ram_allocation_ratio,"
                " disk_allocation_ratio, deleted, mapped)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'QEMU', %s, %s, %s,"
                " %s, %s, %s, 0, %s, %s, %s, %s, '[]', NULL, %s, NULL, %s, %s, %s, 0, 0)",
                rows)
            az_of = {h["name"]: h.get("availability_zone") for h in hosts}
            if any(h["name"] in instances_by_host for h in hosts):
                cur.execute("SELECT uuid, id FROM compute_nodes WHERE deleted = 0")
                node_ids = dict(cur.fetchall())
                cur.executemany(
                    "INSERT INTO instances (created_at, updated_at, launched_at, user_id, project_id,"
                    " image_ref, launch_index, power_state, vm_state, memory_mb, vcpus, root_gb,"
                    " ephemeral_gb, hostname, display_name, host, node, launched_on,"
                    " availability_zone, instance_type_id, uuid, deleted, cleaned, hidden,"
                    " locked, compute_id, os_type)"
                    " VALUES (%s, %s, %s, %s, %s, %s, 0, 1, 'active', %s, %s, %s, 0, %s, %s,"
                    " %s, %s, %s, %s, %s, %s, 0, 0, 0, 0, %s, NULL)",
                    [(now, now, now, i["user_id"], i["project_id"],
                      "e0e0e0e0-e0e0-4e0e-8e0e-e0e0e0e0e001", i["memory_mb"], i["vcpus"],
                      i["root_gb"], f"vm-{i['uuid'][:8]}", f"vm-{i['uuid'][:8]}", h_name, h_name,
                      h_name, az_of.get(h_name) or "nova",
                      1 + [f[0] for f in INSTANCE_FLAVORS].index(i["vcpus"]), i["uuid"],
                      node_ids[i["node_uuid"]])
                     for h_name, here in instances_by_host.items() if h_name in az_of
                     for i in here])
        conn.commit()
    finally:
        conn.close()


def write_aggregates(api_url, aggregates, now):
    """nova host aggregates (with availability_zone metadata for AZs) in the API
    database, as `openstack aggregate create/add host/set --zone` leave them."""
    if not aggregates:
        return
    conn = pymysql.connect(**connect_args(api_url))
    try:
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO aggregates (created_at, uuid, name) VALUES (%s, %s, %s)",
                            [(now, a["uuid"], a["name"]) for a in aggregates])
            cur.execute("SELECT uuid, id FROM aggregates")
            ids = dict(cur.fetchall())
            cur.executemany(
                "INSERT INTO aggregate_metadata (created_at, aggregate_id, `key`, value)"
                " VALUES (%s, %s, %s, %s)",
                [(now, ids[a["uuid"]], k, v) for a in aggregates for k, v in a["metadata"].items()])
            cur.executemany(
                "INSERT INTO aggregate_hosts (created_at, host, aggregate_id) VALUES (%s, %s, %s)",
                [(now, host, ids[a["uuid"]]) for a in aggregates for host in a["hosts"]])
        conn.commit()
    finally:
        conn.close()


def write_host_mappings(api_url, cells, hosts, now):
    """What `nova-manage cell_v2 discover_hosts` writes, in a few statements."""
    conn = pymysql.connect(**connect_args(api_url))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT uuid, id FROM cell_mappings")
            cell_ids = dict(cur.fetchall())
            cur.executemany("INSERT INTO host_mappings (created_at, cell_id, host) VALUES (%s, %s, %s)",
                            [(now, cell_ids[h["cell_uuid"]], h["name"]) for h in hosts])
        conn.commit()
    finally:
        conn.close()
    for cell in cells:
        conn = pymysql.connect(**connect_args(cell["url"]))
        try:
            with conn.cursor() as cur:
                cur.execute("UPDATE compute_nodes SET mapped = 1 WHERE deleted = 0")
            conn.commit()
        finally:
            conn.close()


class Placement:
    def __init__(self, url, token="admin"):
        self.url = url.rstrip("/")
        self.session = requests.Session()
        self.session.headers.update({
            "X-Auth-Token": token,
            "OpenStack-API-Version": PLACEMENT_VERSION,
            "Accept": "application/json",
        })

    def call(self, method, path, body=None, ok=(200, 201, 204)):
        r = self.session.request(method, self.url + path, json=body, timeout=600)
        if r.status_code not in ok:
            raise RuntimeError(f"Placement {method} {path}: {r.status_code} {r.text[:500]}")
        return r.json() if r.content else None

    def create_provider(self, h):
        rp = self.call("POST", "/resource_providers", {"name": h["name"], "uuid": h["uuid"]})
        gen = rp["generation"]
        inv = {
            "VCPU": dict(total=h["vcpus"], reserved=0, min_unit=1, max_unit=h["vcpus"],
                         step_size=1, allocation_ratio=h["cpu_allocation_ratio"]),
            "MEMORY_MB": dict(total=h["memory_mb"], reserved=h["reserved_host_memory_mb"],
                              min_unit=1, max_unit=h["memory_mb"], step_size=1,
                              allocation_ratio=h["ram_allocation_ratio"]),
        }
        if not h.get("pool"):
            inv["DISK_GB"] = dict(total=h["local_gb"], reserved=0, min_unit=1,
                                  max_unit=h["local_gb"], step_size=1,
                                  allocation_ratio=h["disk_allocation_ratio"])
        gen = self._put_with_generation(
            f"/resource_providers/{h['uuid']}/inventories", gen, {"inventories": inv})
        gen = self._put_with_generation(
            f"/resource_providers/{h['uuid']}/traits", gen, {"traits": h["traits"]})
        # nova mirrors its host aggregates into Placement under the same uuid; a
        # disk pool's aggregate exists in Placement only.
        aggregates = h.get("aggregates", []) + h.get("placement_aggregates", [])
        if aggregates:
            self._put_with_generation(
                f"/resource_providers/{h['uuid']}/aggregates", gen, {"aggregates": aggregates})
        for child in h.get("children", []):
            self.create_child(child)

    def create_pool(self, p):
        """A DISK_GB pool shared through its aggregate."""
        rp = self.call("POST", "/resource_providers", {"name": p["name"], "uuid": p["uuid"]})
        gen = self._put_with_generation(
            f"/resource_providers/{p['uuid']}/inventories", rp["generation"],
            {"inventories": {"DISK_GB": dict(
                total=p["disk_gb"], reserved=0, min_unit=1, max_unit=p["disk_gb"],
                step_size=1, allocation_ratio=1.0)}})
        gen = self._put_with_generation(
            f"/resource_providers/{p['uuid']}/traits", gen,
            {"traits": ["MISC_SHARES_VIA_AGGREGATE"]})
        self._put_with_generation(
            f"/resource_providers/{p['uuid']}/aggregates", gen, {"aggregates": [p["aggregate"]]})

    def create_child(self, c):
        """A provider under another, with its inventories and traits."""
        rp = self.call("POST", "/resource_providers", {
            "name": c["name"], "uuid": c["uuid"], "parent_provider_uuid": c["parent"]})
        gen = rp["generation"]
        if c["inventories"]:
            gen = self._put_with_generation(
                f"/resource_providers/{c['uuid']}/inventories", gen,
                {"inventories": c["inventories"]})
        if c["traits"]:
            gen = self._put_with_generation(
                f"/resource_providers/{c['uuid']}/traits", gen, {"traits": c["traits"]})
        if c.get("aggregates"):
            self._put_with_generation(
                f"/resource_providers/{c['uuid']}/aggregates", gen,
                {"aggregates": c["aggregates"]})

    def allocate(self, instances):
        """Allocations of existing instances, many consumers per POST /allocations."""
        body = {}
        for i in instances:
            allocations = {i["node_uuid"]: {"resources": {
                "VCPU": i["vcpus"], "MEMORY_MB": i["memory_mb"]}}}
            if i.get("pool"):
                allocations[i["pool"]] = {"resources": {"DISK_GB": i["root_gb"]}}
            else:
                allocations[i["node_uuid"]]["resources"]["DISK_GB"] = i["root_gb"]
            body[i["uuid"]] = {"allocations": allocations, "project_id": i["project_id"],
                               "user_id": i["user_id"], "consumer_generation": None}
        for _ in range(10):
            r = self.session.post(self.url + "/allocations", json=body, timeout=600)
            if r.status_code == 204:
                return
            # Batches of different hosts share their disk pool (--nested): a
            # concurrent write to it bumps its generation and Placement, having
            # written nothing, asks for the batch again.
            if r.status_code != 409 or "placement.concurrent_update" not in r.text:
                break
        raise RuntimeError(f"Placement POST /allocations: {r.status_code} {r.text[:500]}")

    def _put_with_generation(self, path, gen, body):
        for _ in range(10):
            r = self.session.put(self.url + path,
                                 json=dict(body, resource_provider_generation=gen), timeout=600)
            if r.status_code == 200:
                return r.json()["resource_provider_generation"]
            # Two workers adding providers to the same new aggregate can deadlock in
            # Placement's INSERT into placement_aggregates; it answers 500 and wrote
            # nothing, so the PUT is simply made again.
            deadlock = r.status_code == 500 and "Deadlock found" in r.text
            if r.status_code != 409 and not deadlock:
                raise RuntimeError(f"Placement PUT {path}: {r.status_code} {r.text[:500]}")
            rp = self.call("GET", "/resource_providers/" + path.split("/")[2])
            gen = rp["generation"]
        raise RuntimeError(f"Placement PUT {path}: generation conflicts or deadlocks did not stop")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--config-file", required=True, help="the stack's nova.conf")
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--hosts", type=int, default=20)
    ap.add_argument("--cells", type=int, default=2)
    ap.add_argument("--big-hosts", type=int, default=2)
    ap.add_argument("--disabled-hosts", type=int, default=2)
    ap.add_argument("--down-hosts", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=4, help="parallel Placement writers")
    ap.add_argument("--no-discover", action="store_true", help="skip nova-manage discover_hosts")
    ap.add_argument("--usage", type=float, default=0.0,
                    help="mean fill of enabled hosts by existing instances (0 = empty hosts)")
    ap.add_argument("--azs", type=int, default=0, help="availability zones (host aggregates)")
    ap.add_argument("--aggregates", type=int, default=0, help="more aggregates, without AZ")
    ap.add_argument("--name-prefix", default="cmp",
                    help="host names are this and a 5-digit number")
    ap.add_argument("--nested", action="store_true",
                    help="device and network children under every host, shared disk pools")
    ap.add_argument("--direct-host-mappings", action="store_true",
                    help="write host_mappings in SQL instead of running nova-manage discover_hosts")
    args = ap.parse_args()
    t0 = time.monotonic()

    from nova.objects.service import SERVICE_VERSION

    cp = configparser.ConfigParser(interpolation=None, strict=False)
    cp.read(args.config_file)
    api_url = cp["api_database"]["connection"]
    placement_url = cp["placement"].get("endpoint_override") or "http://127.0.0.1:8778"
    token = cp["placement"].get("token", "admin")

    conn = pymysql.connect(**connect_args(api_url))
    with conn.cursor() as cur:
        cur.execute("SELECT uuid, name, database_connection FROM cell_mappings"
                    " WHERE uuid != %s ORDER BY name", (CELL0_UUID,))
        cells = [dict(uuid=u, name=n, url=c) for u, n, c in cur.fetchall()]
    conn.close()
    if len(cells) < args.cells:
        sys.exit(f"--cells {args.cells} but the API database maps only {len(cells)} cells")
    cells = cells[: args.cells]

    hosts = make_hosts(args, cells)
    instances, aggregates = add_variety(args, hosts)
    pools = add_trees(args, hosts, instances) if args.nested else []
    instances_by_host = {}
    for inst in instances:
        instances_by_host.setdefault(inst["host"], []).append(inst)
    unknown = {t for h in hosts for t in h["traits"]} - set(os_traits.get_traits())
    if unknown:
        sys.exit(f"traits unknown to os-traits {os_traits.__version__ if hasattr(os_traits, '__version__') else ''}: {sorted(unknown)}")

    # The stale list first, so the running heartbeat never refreshes a down host.
    with open(os.path.join(args.state_dir, "stale-hosts.txt"), "w") as f:
        f.writelines(h["name"] + "\n" for h in hosts if h["down"])

    now = utcnow()
    stale_time = now - datetime.timedelta(hours=1)
    timings = {}
    for cell in cells:
        write_cell(cell["url"], [h for h in hosts if h["cell"] == cell["name"]],
                   SERVICE_VERSION, now, stale_time, instances_by_host)
    write_aggregates(api_url, aggregates, now)
    timings["sql_s"] = round(time.monotonic() - t0, 1)

    t1 = time.monotonic()
    placement = Placement(placement_url, token)
    if args.nested:
        for trait in NESTED_TRAITS:
            placement.call("PUT", f"/traits/{trait}")
        for p in pools:
            placement.create_pool(p)
    with concurrent.futures.ThreadPoolExecutor(max(1, args.workers)) as pool:
        for fut in concurrent.futures.as_completed(
                [pool.submit(placement.create_provider, h) for h in hosts]):
            fut.result()
    timings["placement_providers_s"] = round(time.monotonic() - t1, 1)
    if instances:
        # One batch per run of consecutive hosts: no two batches touch the same
        # provider, so concurrent batches never conflict on its generation.
        t1 = time.monotonic()
        batches, batch = [], []
        for h in hosts:
            batch.extend(instances_by_host.get(h["name"], []))
            if len(batch) >= 50:
                batches.append(batch)
                batch = []
        if batch:
            batches.append(batch)
        # Two at a time: a big POST /allocations keeps a Placement worker busy for
        # seconds, and the stack's Placement has two workers.
        with concurrent.futures.ThreadPoolExecutor(min(2, max(1, args.workers))) as pool:
            for fut in concurrent.futures.as_completed(
                    [pool.submit(placement.allocate, b) for b in batches]):
                fut.result()
        timings["placement_allocations_s"] = round(time.monotonic() - t1, 1)

    t1 = time.monotonic()
    if args.direct_host_mappings:
        write_host_mappings(api_url, cells, hosts, now)
    elif not args.no_discover:
        nova_manage = os.path.join(os.path.dirname(sys.executable), "nova-manage")
        out = subprocess.run([nova_manage, "--config-file", args.config_file,
                              "cell_v2", "discover_hosts"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.stderr.write(out.stdout + out.stderr)
            sys.exit("nova-manage cell_v2 discover_hosts failed")
    timings["host_mappings_s"] = round(time.monotonic() - t1, 1)

    cloud = {
        "seed": args.seed,
        "service_version": SERVICE_VERSION,
        "seeded_at": now.isoformat() + "Z",
        "cells": {c["name"]: {"uuid": c["uuid"],
                              "hosts": [h["name"] for h in hosts if h["cell"] == c["name"]]}
                  for c in cells},
        "hosts": hosts,
        "instances": len(instances),
        "aggregates": [{k: v for k, v in a.items() if k != "share"} for a in aggregates],
        "pools": pools,
    }
    path = os.path.join(args.state_dir, "cloud.json")
    with open(path, "w") as f:
        json.dump(cloud, f, indent=1 if len(hosts) <= 1000 else None)
    summary = {
        "cloud_json": path,
        "hosts": len(hosts),
        "hosts_per_cell": {c: len(v["hosts"]) for c, v in cloud["cells"].items()},
        "cell_uuids": {c: v["uuid"] for c, v in cloud["cells"].items()},
        **{role: [h["name"] for h in hosts if h["role"] == role]
           for role in ("big", "disabled", "down")},
        "instances": len(instances),
        "aggregates": len(aggregates),
        "availability_zones": sorted({a["az"] for a in aggregates if a["az"]}),
        "seconds": round(time.monotonic() - t0, 1),
        **timings,
    }
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
