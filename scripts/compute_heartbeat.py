#!/usr/bin/env python3
"""Stand-in for nova-compute's servicegroup heartbeat on a seeded test cloud.

There are no real nova-compute processes in the test stack, only the rows that
scripts/seed_cloud.py writes. nova (and any drop-in scheduler) treats a compute
service as up only while |now - services.last_seen_up| <= service_down_time
(60 s), so without a heartbeat every seeded host goes down after a minute.

Every --interval seconds (default 10, nova's report_interval) this process does
what nova's DB servicegroup driver does for each nova-compute: report_count + 1,
last_seen_up = updated_at = now (UTC), in every cell database listed in the API
database's cell_mappings. Hosts named in <state-dir>/stale-hosts.txt (written by
seed_cloud.py --down-hosts) are skipped so that they stay down.

It only touches rows with binary = 'nova-compute'; the scheduler's own service
row is the scheduler's business. Started by `scripts/stack.sh up`, stopped by
`scripts/stack.sh down` (SIGTERM). It also exits by itself when the cells it
started with are gone (another `stack.sh up`, e.g. from another clone, recreated
the databases), so a stray heartbeat never revives hosts of a newer stack.
"""

import argparse
import configparser
import os
import signal
import sys
import threading
import time
import urllib.parse

import pymysql

CELL0_UUID = "00000000-0000-0000-0000-000000000000"


def connect_args(url):
    """pymysql.connect kwargs from an SQLAlchemy mysql+pymysql URL."""
    u = urllib.parse.urlsplit(url)
    return dict(
        host=u.hostname or "127.0.0.1",
        port=u.port or 3306,
        user=urllib.parse.unquote(u.username or "root"),
        password=urllib.parse.unquote(u.password or ""),
        database=u.path.lstrip("/"),
        charset="utf8",
        autocommit=True,
        connect_timeout=5,
    )


def read_conf(path):
    cp = configparser.ConfigParser(interpolation=None, strict=False)
    if not cp.read(path):
        sys.exit(f"cannot read {path}")
    return cp


def cells(api_url):
    """{cell uuid: database_connection} of the API database's cells but cell0."""
    conn = pymysql.connect(**connect_args(api_url))
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT uuid, database_connection FROM cell_mappings WHERE uuid != %s",
                (CELL0_UUID,),
            )
            return dict(cur.fetchall())
    finally:
        conn.close()


def stale_hosts(state_dir):
    path = os.path.join(state_dir, "stale-hosts.txt")
    try:
        with open(path) as f:
            return sorted({line.strip() for line in f if line.strip()})
    except FileNotFoundError:
        return []


def beat(cell_urls, state_dir):
    skip = stale_hosts(state_dir)
    total = 0
    for url in cell_urls.values():
        conn = pymysql.connect(**connect_args(url))
        try:
            with conn.cursor() as cur:
                sql = (
                    "UPDATE services SET report_count = report_count + 1, "
                    "last_seen_up = UTC_TIMESTAMP(), updated_at = UTC_TIMESTAMP() "
                    "WHERE `binary` = 'nova-compute' AND deleted = 0"
                )
                if skip:
                    sql += " AND host NOT IN (%s)" % ", ".join(["%s"] * len(skip))
                total += cur.execute(sql, skip)
        finally:
            conn.close()
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config-file", required=True, help="the stack's nova.conf")
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--pidfile")
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--once", action="store_true", help="one beat, then exit")
    args = ap.parse_args()

    api_url = read_conf(args.config_file)["api_database"]["connection"]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    if args.pidfile:
        with open(args.pidfile, "w") as f:
            f.write(f"{os.getpid()}\n")

    last_count = None
    owned = None  # the cell uuids of the stack this heartbeat belongs to
    try:
        while True:
            try:
                current = cells(api_url)
                if owned is None and current:
                    owned = set(current)
                elif owned is not None and set(current) != owned:
                    print(f"{time.strftime('%H:%M:%S')} the cells changed (stack recreated): exiting",
                          flush=True)
                    break
                n = beat(current, args.state_dir)
                if n != last_count:
                    print(f"{time.strftime('%H:%M:%S')} heartbeat: {n} nova-compute services", flush=True)
                    last_count = n
            except pymysql.MySQLError as e:
                print(f"{time.strftime('%H:%M:%S')} heartbeat failed: {e}", flush=True)
            if args.once or stop.wait(args.interval):
                break
    finally:
        if args.pidfile:
            try:
                os.unlink(args.pidfile)
            except FileNotFoundError:
                pass


if __name__ == "__main__":
    main()
