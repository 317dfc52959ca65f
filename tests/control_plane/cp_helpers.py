"""Helpers for the control-plane tests: a compute API client (plain HTTP, as
nova's own clients speak it), Placement reads, and the allocation checks every
test ends with. The stack is scripts/control_plane.sh's; its endpoints are in
<state>/cp/endpoints.json.
"""

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]
CP_STATE = Path(os.environ.get("NSRS_CP_STATE") or
                Path(os.environ.get("NSRS_STATE") or REPO / ".stack") / "cp")
# The nova release of every service here (the venv's), as the conformance tests name it.
sys.path.insert(0, str(REPO / "tests" / "conformance"))
from nsrs_helpers import assert_runs_as_this_release  # noqa: E402,F401

ENDPOINTS_FILE = CP_STATE / "endpoints.json"

# The identity keystonemiddleware would have put in the request; the stack's
# api-paste.ini builds nova's context from these headers (no authtoken).
PROJECT_ID = "6e737273637070726f6a656374303031"
USER_ID = "admin"
COMPUTE_MICROVERSION = "2.94"  # 2.95 would leave an evacuated server stopped
PLACEMENT_MICROVERSION = "placement 1.39"
IMAGE_ID = "c0ffee00-0000-4000-8000-0000000000c1"  # the Glance stand-in's image
TIMEOUT = float(os.environ.get("NSRS_CP_TIMEOUT", "90"))
NO_VALID_HOST = "No valid host was found"


def endpoints():
    try:
        return json.loads(ENDPOINTS_FILE.read_text())
    except FileNotFoundError:
        raise RuntimeError(f"{ENDPOINTS_FILE} is missing: scripts/control_plane.sh up first")


def wait_for(what, predicate, timeout=TIMEOUT, interval=0.5):
    """Poll predicate() until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


class ApiError(AssertionError):
    def __init__(self, resp):
        super().__init__(f"{resp.request.method} {resp.request.url} -> {resp.status_code}: {resp.text[:500]}")
        self.status = resp.status_code


class ComputeAPI:
    """nova's compute REST API as an admin of one project."""

    def __init__(self, base, microversion=COMPUTE_MICROVERSION):
        self.base = base
        self.session = requests.Session()
        self.session.headers.update({
            "X-Auth-Token": "admin", "X-User-Id": USER_ID, "X-Project-Id": PROJECT_ID,
            "X-Roles": "admin,member,reader", "Content-Type": "application/json",
            "Accept": "application/json", "OpenStack-API-Version": f"compute {microversion}",
        })
        self.created_servers = []  # every server this client asked for, deleted or not

    def request(self, method, path, body=None, microversion=None, ok=(200, 201, 202, 204)):
        headers = {"OpenStack-API-Version": f"compute {microversion}"} if microversion else {}
        resp = self.session.request(method, self.base + path, headers=headers, timeout=60,
                                    data=None if body is None else json.dumps(body))
        if resp.status_code not in ok:
            raise ApiError(resp)
        return resp.json() if resp.content else None

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def put(self, path, body=None, **kw):
        return self.request("PUT", path, body, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    # --- servers ---------------------------------------------------------------
    def boot(self, flavor_id, name=None, microversion=None, **extra):
        """POST /servers; returns the server id (with return_reservation_id, the ids of all)."""
        hints = extra.pop("scheduler_hints", None)
        server = {"name": name or f"cp-{uuid.uuid4().hex[:8]}", "imageRef": IMAGE_ID,
                  "flavorRef": flavor_id, "networks": "none"}
        server.update(extra)
        body = {"server": server}
        if hints:
            body["os:scheduler_hints"] = hints
        resp = self.post("/servers", body, microversion=microversion)
        if "reservation_id" in resp:
            ids = [s["id"] for s in self.get(f"/servers?reservation_id={resp['reservation_id']}")["servers"]]
            self.created_servers.extend(ids)
            return ids
        self.created_servers.append(resp["server"]["id"])
        return resp["server"]["id"]

    def server(self, server_id):
        return self.get(f"/servers/{server_id}")["server"]

    def wait_status(self, server_id, *statuses, timeout=TIMEOUT):
        """Wait until the server's status is one of statuses and no task runs; ERROR
        ends the wait early (with the fault in the message) unless it was asked for."""
        def settled():
            s = self.server(server_id)
            if s["status"] in statuses and s.get("OS-EXT-STS:task_state") is None:
                return s
            if s["status"] == "ERROR" and "ERROR" not in statuses:
                raise AssertionError(f"server {server_id} went to ERROR (waiting for {statuses}): "
                                     f"fault {s.get('fault')}")
            return None
        return wait_for(f"server {server_id} to be {'/'.join(statuses)}", settled, timeout)

    def action(self, server_id, body, **kw):
        return self.post(f"/servers/{server_id}/action", body, **kw)

    def delete_server(self, server_id, wait=True):
        try:
            self.delete(f"/servers/{server_id}")
        except ApiError as e:
            if e.status != 404:
                raise
        if wait:
            wait_for(f"server {server_id} to be gone", lambda: self._gone(server_id))

    def _gone(self, server_id):
        resp = self.session.get(f"{self.base}/servers/{server_id}", timeout=60)
        return resp.status_code == 404

    def servers(self):
        return self.get("/servers/detail?all_tenants=1")["servers"]

    def migrations(self, server_id):
        return self.get(f"/os-migrations?instance_uuid={server_id}")["migrations"]

    # --- services ---------------------------------------------------------------
    def compute_services(self):
        return {s["host"]: s for s in self.get("/os-services?binary=nova-compute")["services"]}

    def set_service(self, host, **fields):
        svc = self.compute_services()[host]
        return self.put(f"/os-services/{svc['id']}", fields)["service"]


class Placement:
    def __init__(self, base):
        self.base = base
        self.session = requests.Session()
        self.session.headers.update({"X-Auth-Token": "admin", "Accept": "application/json",
                                     "OpenStack-API-Version": PLACEMENT_MICROVERSION})

    def get(self, path):
        resp = self.session.get(self.base + path, timeout=30)
        if resp.status_code != 200:
            raise ApiError(resp)
        return resp.json()

    def providers(self):
        return {rp["uuid"]: rp for rp in self.get("/resource_providers")["resource_providers"]}

    def allocations(self, consumer):
        """{provider uuid: resources} of a consumer (empty if it has none)."""
        return {rp: a["resources"] for rp, a in self.get(f"/allocations/{consumer}")["allocations"].items()}

    def provider_allocations(self, rp_uuid):
        return self.get(f"/resource_providers/{rp_uuid}/allocations")["allocations"]

    def aggregates(self, rp_uuid):
        return self.get(f"/resource_providers/{rp_uuid}/aggregates")["aggregates"]


def enable_computes(nova, placement, computes, hosts):
    """Re-enables the compute services of `hosts` and waits until the scheduler can see
    it: nova-compute removes the COMPUTE_STATUS_DISABLED trait from its provider (nova's
    prefilter asks Placement without it; a refused trait update waits for the compute's
    periodic task), and the scheduler's host state cache reads the service row again
    (every `host_state_refresh_interval`, 1 s, and one pass may be under way)."""
    for h in hosts:
        nova.set_service(h, status="enabled")

    def traits_cleared():
        return all("COMPUTE_STATUS_DISABLED" not in
                   placement.get(f"/resource_providers/{computes[h]}/traits")["traits"] for h in hosts)
    wait_for(f"the COMPUTE_STATUS_DISABLED trait to leave {', '.join(hosts)}", traits_cleared)
    time.sleep(2.5)


def allocation_trees(placement, consumer):
    """{root provider name: {resource class: amount}} of a consumer's allocations."""
    providers = placement.providers()
    trees = {}
    for rp, resources in placement.allocations(consumer).items():
        root = providers[rp]["root_provider_uuid"]
        total = trees.setdefault(providers[root]["name"], {})
        for rc, n in resources.items():
            total[rc] = total.get(rc, 0) + n
    return trees


def assert_allocated_on(placement, server, host, flavor):
    """The server's allocations are on exactly one provider tree, that of `host`,
    and are exactly the flavor's resources."""
    trees = allocation_trees(placement, server["id"])
    assert trees == {host: flavor_resources(flavor)}, (
        f"server {server['id']} ({server['status']} on {host_of(server)}): allocations "
        f"{trees}, expected {flavor_resources(flavor)} on {host} only")


def flavor_resources(flavor):
    return {"VCPU": flavor["vcpus"], "MEMORY_MB": flavor["ram"], "DISK_GB": flavor["disk"]}


def host_of(server):
    return server.get("OS-EXT-SRV-ATTR:host")


def control(*args):
    """scripts/control_plane.sh ARGS (stop-compute / start-compute) on this stack."""
    env = dict(os.environ, NSRS_CP_STATE=str(CP_STATE))
    subprocess.run([endpoints()["control_script"], *args], check=True, env=env,
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
