"""The shadow (`nova-scheduler-rs shadow`, started by scripts/control_plane.sh beside
the scheduler under test) saw the run's boots and moves: every call of the run was
decided, its instances compared with where the scheduler under test put them (read
from Placement), and none differed. Runs last (file order): the run's servers are
the traffic."""

import json
import time
import urllib.request

import pytest


def _report(url):
    with urllib.request.urlopen(url + "/shadow", timeout=10) as r:
        return json.load(r)


def test_the_shadow_saw_boots_and_moves(endpoints):
    url = endpoints.get("shadow")
    if not url:
        pytest.skip("no shadow in this run (nova-scheduler-rs is not built)")
    deadline = time.monotonic() + 60
    while (report := _report(url))["pending"] and time.monotonic() < deadline:
        time.sleep(1)
    text = json.dumps(report, indent=1)
    assert report["pending"] == 0, f"comparisons still waiting after 60 s:\n{text}"
    # Boots, multi-creates, server groups, zones; cold migration, resize, live
    # migration, unshelve, evacuation.
    assert report["calls"] >= 10, text
    assert report["moves"] >= 4, text
    assert report["undecodable"] == 0, text
    instances = report["instances"]
    assert instances["differ"] == 0, text
    known = instances["agree"] + instances["tie"]
    assert known >= report["calls"], text
