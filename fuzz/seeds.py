#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpora (fuzz/corpus/<target>/) and dictionaries (fuzz/dict/)
from the select_destinations wire samples in src/rpc/testdata. Deterministic: run
it again after changing the samples or the targets' input formats.

    python3 fuzz/seeds.py
"""
import json
import pathlib
import random
import re
import shutil
import zlib

FUZZ = pathlib.Path(__file__).resolve().parent
TESTDATA = FUZZ.parent / "src" / "rpc" / "testdata"
SAMPLES = ["single_instance", "multi_instance_group", "hints_image_props_az", "novalidhost"]

# The envelope target's selector byte (see fuzz_targets/envelope.rs).
PLAIN = 0x00
ZLIB_AS_IS = 2 << 2
ZLIB_HERE = 3 << 2


def capture(name):
    return json.loads((TESTDATA / f"{name}.request.json").read_text())


def dumps(value):
    return json.dumps(value, separators=(", ", ": ")).encode()


def envelope(inner):
    return dumps({"oslo.version": "2.0", "oslo.message": json.dumps(inner)})


def obj(name, version, data):
    return {"nova_object.name": name, "nova_object.namespace": "nova",
            "nova_object.version": version, "nova_object.data": data}


def write(target, name, data):
    d = FUZZ / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def rust_strings(const):
    """The string literals of `const <const>: &[&str] = &[...];` in filters.rs."""
    text = (FUZZ / "fuzz_targets" / "filters.rs").read_text()
    body = re.search(rf"const {const}: &\[&str\] = &\[(.*?)\];", text, re.S).group(1)
    body = re.sub(r"//[^\n]*", "", body)
    return [json.loads(s) for s in re.findall(r'"(?:[^"\\]|\\.)*"', body)]


def dict_entry(token):
    out = []
    for b in token.encode():
        if b in (0x22, 0x5C):
            out.append("\\" + chr(b))
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append(f"\\x{b:02X}")
    return '"' + "".join(out) + '"'


def write_dict(target, tokens):
    d = FUZZ / "dict"
    d.mkdir(exist_ok=True)
    seen, lines = set(), [f"# libFuzzer dictionary of the {target} target (written by fuzz/seeds.py)"]
    for t in tokens:
        if t and t not in seen:
            seen.add(t)
            lines.append(dict_entry(t))
    (d / f"{target}.dict").write_text("\n".join(lines) + "\n")


def main():
    for target in ("envelope", "request_spec", "filters"):
        shutil.rmtree(FUZZ / "corpus" / target, ignore_errors=True)

    inner_of = {n: json.loads(capture(n)["body"]["oslo.message"]) for n in SAMPLES}

    # envelope: the captured bodies byte for byte, zlib-compressed, and the other calls.
    for n in SAMPLES:
        write("envelope", f"{n}.bin", bytes([PLAIN]) + capture(n)["body_raw"].encode())
    raw = capture("single_instance")["body_raw"].encode()
    write("envelope", "single_instance_zlib.bin", bytes([ZLIB_AS_IS]) + zlib.compress(raw))
    write("envelope", "single_instance_zlib_here.bin", bytes([ZLIB_HERE]) + raw)
    ping = {"method": "ping", "namespace": "baseapi", "version": "1.1", "args": {"arg": "x"},
            "_msg_id": "c1bb499ae8ce4e348df54057406e0e48", "_reply_q": "reply_e88d8a02",
            "_timeout": 60, "_unique_id": "caaff152172f48028cb3e98db72eebfc"}
    write("envelope", "baseapi_ping_legacy.bin", bytes([PLAIN]) + dumps(ping))
    instance = obj("Instance", "2.8", {"uuid": "440aae02-195c-4c8e-9733-2cf3618e3f10",
                                       "instance_type_id": 2})
    cast = {"method": "update_instance_info", "version": "4.2",
            "args": {"host_name": "cmp00001",
                     "instance_info": obj("InstanceList", "2.6", {"objects": [instance]})},
            "_unique_id": "0a1b2c3d4e5f40718293a4b5c6d7e8f9", "_context_request_id": "req-1"}
    write("envelope", "update_instance_info_cast.bin", bytes([PLAIN]) + envelope(cast))

    # request_spec: each sample's args and a spec_obj, the legacy dicts, the casts' args.
    for n in SAMPLES:
        write("request_spec", f"{n}_args.json", dumps(inner_of[n]["args"]))
    write("request_spec", "hints_image_props_az_spec_obj.json",
          dumps(inner_of["hints_image_props_az"]["args"]["spec_obj"]))
    legacy = {
        "request_spec": {
            "num_instances": 2,
            "image": {"id": "img", "disk_format": "qcow2", "properties": {"hw_disk_bus": "virtio"}},
            "instance_properties": {"uuid": "u1", "project_id": "p", "user_id": "u",
                                    "availability_zone": "az1", "numa_topology": None,
                                    "pci_requests": None},
            "instance_type": {"memory_mb": 2048, "vcpus": 2, "root_gb": 20, "ephemeral_gb": 0,
                              "swap": 0, "extra_specs": {"hw:cpu_policy": "dedicated"}},
        },
        "filter_properties": {
            "ignore_hosts": ["h9"], "force_hosts": None,
            "scheduler_hints": {"same_host": "u0", "different_host": ["u2", "u3"]},
            "group_updated": True, "group_policies": ["anti-affinity"], "group_hosts": ["h1"],
            "group_members": ["u0"], "group_uuid": "g",
        },
    }
    write("request_spec", "legacy_rpc_4_0_args.json", dumps(legacy))
    write("request_spec", "update_instance_info_args.json", dumps(cast["args"]))
    aggregate = obj("Aggregate", "1.3", {"id": 1, "uuid": "aaaaaaaa-0000-4000-8000-000000000001",
                                         "name": "agg1", "hosts": ["cmp00001"],
                                         "metadata": {"availability_zone": "az1"}})
    write("request_spec", "update_aggregates_args.json", dumps({"aggregates": [aggregate]}))

    # filters: the samples' spec_obj as JSON, and a few edit programs.
    for n in SAMPLES:
        write("filters", f"{n}_spec_obj.json", dumps(inner_of[n]["args"]["spec_obj"]))
    rng = random.Random(1)
    for i in range(4):
        program = bytes(rng.randrange(1, 256) for _ in range(96))
        if program[0] == ord("{"):
            program = b"\x00" + program[1:]
        write("filters", f"edits_{i}.bin", program)

    # Dictionaries: the names the decoders read, plain and as quoted inside oslo.message.
    names = rust_strings("KEYS") + rust_strings("STRINGS")
    json_tokens = ['{"', '": ', '", "', '": {', '": [', "null", "true", "false", "[]", "{}",
                   "-0", "1e308", "0.5", "\\u0000", "\\ud800"]
    quoted = [f'"{k}"' for k in names]
    write_dict("request_spec", json_tokens + quoted)
    rpc = ["oslo.version", "oslo.message", "2.0", "2.1", "_msg_id", "_reply_q", "_timeout",
           "_unique_id", "_context_request_id", "_context_roles", "_context_is_admin",
           "_context_auth_token", "_context_read_deleted", "method", "args", "namespace",
           "version", "baseapi", "ping", "get_backdoor_port", "oslo_rpc_server_ping",
           "select_destinations", "update_aggregates", "delete_aggregate",
           "update_instance_info", "delete_instance_info", "sync_instance_info", "4.5", "4.0",
           "5.0", "1.1", "instance_uuids", "spec_obj", "request_spec", "filter_properties",
           "return_objects", "return_alternates", "instance_info", "host_name", "aggregates",
           "aggregate", "instance_uuid"]
    escaped = [f'\\"{k}\\"' for k in rpc + names[:80]]
    write_dict("envelope", json_tokens + [f'"{k}"' for k in rpc] + escaped)


if __name__ == "__main__":
    main()
