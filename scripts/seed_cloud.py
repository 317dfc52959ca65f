#!/usr/bin/env python3
"""Seed a test cloud that nova 34 accepts: compute services and nodes in the
cell databases plus the matching resource providers in Placement.

Run it with the stack's venv python after `scripts/stack.sh up` (or simply
`scripts/stack.sh seed ARGS`). The result is a function of the arguments and
--seed only (uuids included), so every run of the same command gives the same
cloud.

Per host (named cmp00001, cmp00002, ...; spread round-robin over the cells):
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
            "name": f"cmp{i + 1:05d}",
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


def cpu_info(h):
    return json.dumps({
        "arch": "x86_64", "model": "Cascadelake-Server", "vendor": "Intel",
        "topology": {"cells": 1, "sockets": 1, "cores": h["vcpus"], "threads": 1},
        "features": ["sse4.2", "avx", "avx2"] if "HW_CPU_X86_AVX2" in h["traits"] else ["sse4.2", "avx"],
    })


def write_cell(cell_url, hosts, service_version, now, stale_time):
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
            cur.executemany(
                "INSERT INTO compute_nodes (created_at, updated_at, service_id, host, uuid,"
                " vcpus, memory_mb, local_gb, vcpus_used, memory_mb_used, local_gb_used,"
                " hypervisor_type, hypervisor_version, hypervisor_hostname, cpu_info,"
                " free_ram_mb, free_disk_gb, disk_available_least, current_workload, running_vms,"
                " host_ip, supported_instances, pci_stats, metrics, extra_resources, stats,"
                " numa_topology, cpu_allocation_ratio, ram_allocation_ratio,"
                " disk_allocation_ratio, deleted, mapped)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 0, %s, 0, 'QEMU', %s, %s, %s,"
                " %s, %s, %s, 0, 0, %s, %s, %s, '[]', NULL, %s, NULL, %s, %s, %s, 0, 0)",
                [(now, now, service_ids[h["name"]], h["name"], h["uuid"],
                  h["vcpus"], h["memory_mb"], h["local_gb"], h["reserved_host_memory_mb"],
                  h["hypervisor_version"], h["name"], cpu_info(h),
                  h["memory_mb"] - h["reserved_host_memory_mb"], h["local_gb"], h["local_gb"],
                  h["host_ip"], json.dumps([["x86_64", "qemu", "hvm"], ["i686", "qemu", "hvm"]]),
                  PCI_STATS_EMPTY,
                  json.dumps({"failed_builds": "0", "io_workload": "0", "num_instances": "0"}),
                  h["cpu_allocation_ratio"], h["ram_allocation_ratio"], h["disk_allocation_ratio"])
                 for h in hosts])
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
        r = self.session.request(method, self.url + path, json=body, timeout=60)
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
            "DISK_GB": dict(total=h["local_gb"], reserved=0, min_unit=1, max_unit=h["local_gb"],
                            step_size=1, allocation_ratio=h["disk_allocation_ratio"]),
        }
        gen = self._put_with_generation(
            f"/resource_providers/{h['uuid']}/inventories", gen, {"inventories": inv})
        self._put_with_generation(
            f"/resource_providers/{h['uuid']}/traits", gen, {"traits": h["traits"]})

    def _put_with_generation(self, path, gen, body):
        for _ in range(10):
            r = self.session.put(self.url + path,
                                 json=dict(body, resource_provider_generation=gen), timeout=60)
            if r.status_code == 200:
                return r.json()["resource_provider_generation"]
            if r.status_code != 409:
                raise RuntimeError(f"Placement PUT {path}: {r.status_code} {r.text[:500]}")
            rp = self.call("GET", "/resource_providers/" + path.split("/")[2])
            gen = rp["generation"]
        raise RuntimeError(f"Placement PUT {path}: generation conflicts did not stop")


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
    unknown = {t for h in hosts for t in h["traits"]} - set(os_traits.get_traits())
    if unknown:
        sys.exit(f"traits unknown to os-traits {os_traits.__version__ if hasattr(os_traits, '__version__') else ''}: {sorted(unknown)}")

    # The stale list first, so the running heartbeat never refreshes a down host.
    with open(os.path.join(args.state_dir, "stale-hosts.txt"), "w") as f:
        f.writelines(h["name"] + "\n" for h in hosts if h["down"])

    now = utcnow()
    stale_time = now - datetime.timedelta(hours=1)
    for cell in cells:
        write_cell(cell["url"], [h for h in hosts if h["cell"] == cell["name"]],
                   SERVICE_VERSION, now, stale_time)

    placement = Placement(placement_url, token)
    with concurrent.futures.ThreadPoolExecutor(max(1, args.workers)) as pool:
        for fut in concurrent.futures.as_completed(
                [pool.submit(placement.create_provider, h) for h in hosts]):
            fut.result()

    if not args.no_discover:
        nova_manage = os.path.join(os.path.dirname(sys.executable), "nova-manage")
        out = subprocess.run([nova_manage, "--config-file", args.config_file,
                              "cell_v2", "discover_hosts"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.stderr.write(out.stdout + out.stderr)
            sys.exit("nova-manage cell_v2 discover_hosts failed")

    cloud = {
        "seed": args.seed,
        "service_version": SERVICE_VERSION,
        "seeded_at": now.isoformat() + "Z",
        "cells": {c["name"]: {"uuid": c["uuid"],
                              "hosts": [h["name"] for h in hosts if h["cell"] == c["name"]]}
                  for c in cells},
        "hosts": hosts,
    }
    path = os.path.join(args.state_dir, "cloud.json")
    with open(path, "w") as f:
        json.dump(cloud, f, indent=1)
    summary = {
        "cloud_json": path,
        "hosts": len(hosts),
        "hosts_per_cell": {c: len(v["hosts"]) for c, v in cloud["cells"].items()},
        "cell_uuids": {c: v["uuid"] for c, v in cloud["cells"].items()},
        **{role: [h["name"] for h in hosts if h["role"] == role]
           for role in ("big", "disabled", "down")},
        "seconds": round(time.monotonic() - t0, 1),
    }
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
