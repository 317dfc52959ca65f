"""Local stand-ins for the two OpenStack services nova calls that the
control-plane tests do not exercise: Glance (image API v2) and Neutron
(network API v2.0). scripts/control_plane.sh starts one process serving both:

    python standins.py --glance-port 9292 --neutron-port 9696 --log calls.jsonl

Glance: the images nova reads (one seeded image, `IMAGE_ID`) and the ones it
writes for shelve (create, upload, update, delete), and the image schema
glanceclient asks for. Neutron: servers are booted with `networks: none`, so
nova only lists (ports, networks, extensions ...): every GET of a collection
answers an empty list. Every request is appended to the JSON-lines log (method,
path, status) so what nova really called can be read after a run; a request the
stand-in does not know answers 404 and is logged as such.
"""

import argparse
import datetime
import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

IMAGE_ID = "c0ffee00-0000-4000-8000-0000000000c1"

IMAGE_SCHEMA = {
    "name": "image",
    "additionalProperties": {"type": "string"},
    "links": [{"href": "{self}", "rel": "self"}, {"href": "{file}", "rel": "enclosure"},
              {"href": "{schema}", "rel": "describedby"}],
    "properties": {
        "id": {"type": "string"},
        "name": {"type": ["null", "string"]},
        "status": {"type": "string", "readOnly": True},
        "visibility": {"type": "string", "enum": ["community", "public", "private", "shared"]},
        "protected": {"type": "boolean"},
        "checksum": {"type": ["null", "string"], "readOnly": True},
        "os_hash_algo": {"type": ["null", "string"], "readOnly": True},
        "os_hash_value": {"type": ["null", "string"], "readOnly": True},
        "owner": {"type": ["null", "string"]},
        "size": {"type": ["null", "integer"], "readOnly": True},
        "virtual_size": {"type": ["null", "integer"], "readOnly": True},
        "container_format": {"type": ["null", "string"],
                             "enum": [None, "ami", "ari", "aki", "bare", "ovf", "ova", "docker",
                                      "compressed"]},
        "disk_format": {"type": ["null", "string"],
                        "enum": [None, "ami", "ari", "aki", "vhd", "vhdx", "vmdk", "raw", "qcow2",
                                 "vdi", "iso", "ploop"]},
        "created_at": {"type": "string", "readOnly": True},
        "updated_at": {"type": "string", "readOnly": True},
        "tags": {"type": "array", "items": {"type": "string"}},
        "direct_url": {"type": "string", "readOnly": True},
        "min_ram": {"type": "integer"},
        "min_disk": {"type": "integer"},
        "self": {"type": "string", "readOnly": True},
        "file": {"type": "string", "readOnly": True},
        "schema": {"type": "string", "readOnly": True},
        "locations": {"type": "array"},
    },
}


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _image(image_id, **fields):
    img = {
        "id": image_id, "name": None, "status": "queued", "visibility": "public",
        "protected": False, "checksum": None, "os_hash_algo": None, "os_hash_value": None,
        "owner": None, "size": None, "virtual_size": None, "container_format": None,
        "disk_format": None, "created_at": _now(), "updated_at": _now(), "tags": [],
        "min_ram": 0, "min_disk": 0, "self": f"/v2/images/{image_id}",
        "file": f"/v2/images/{image_id}/file", "schema": "/v2/schemas/image",
    }
    img.update(fields)
    return img


class State:
    def __init__(self, log_path):
        self.lock = threading.Lock()
        self.log_path = log_path
        self.images = {IMAGE_ID: _image(
            IMAGE_ID, name="nsrs-fake-image", status="active", container_format="bare",
            disk_format="qcow2", size=1024, virtual_size=1024, checksum="0" * 32)}

    def log(self, service, method, path, status):
        if not self.log_path:
            return
        line = json.dumps({"t": _now(), "service": service, "method": method, "path": path,
                           "status": status})
        with self.lock, open(self.log_path, "a") as f:
            f.write(line + "\n")


def make_handler(service, state):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # the JSON-lines log replaces stderr lines
            pass

        def _body(self):
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                return self.rfile.read(n)
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                data = b""
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return data
                    data += self.rfile.read(size)
                    self.rfile.readline()
            return b""

        def _send(self, status, doc=None, ctype="application/json"):
            body = b"" if doc is None else json.dumps(doc).encode()
            self.send_response(status)
            if body:
                self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body:
                self.wfile.write(body)
            state.log(service, self.command, self.path, status)

        def _dispatch(self):
            path = urlsplit(self.path).path.rstrip("/")
            body = self._body()
            try:
                status, doc = (glance if service == "glance" else neutron)(
                    state, self.command, path, body, self.headers)
            except Exception as e:  # a stand-in bug must show, not hang the caller
                status, doc = 500, {"error": repr(e)}
            self._send(status, doc)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _dispatch

    return Handler


def glance(state, method, path, body, headers):
    if path in ("", "/versions"):
        return 200, {"versions": [{"id": "v2.16", "status": "CURRENT",
                                   "links": [{"rel": "self", "href": "/v2/"}]}]}
    if method == "GET" and path == "/v2/schemas/image":
        return 200, IMAGE_SCHEMA
    if path == "/v2/images":
        if method == "GET":
            with state.lock:
                return 200, {"images": list(state.images.values()), "schema": "/v2/schemas/images",
                             "first": "/v2/images"}
        if method == "POST":
            req = json.loads(body or b"{}")
            image_id = req.pop("id", None) or str(uuid.uuid4())
            img = _image(image_id, **req)
            with state.lock:
                state.images[image_id] = img
            return 201, img
    m = re.fullmatch(r"/v2/images/([^/]+)(/file)?", path)
    if m:
        image_id, is_file = m.group(1), m.group(2)
        with state.lock:
            img = state.images.get(image_id)
            if img is None:
                return 404, {"message": f"image {image_id} not found"}
            if is_file and method == "PUT":
                img.update(status="active", size=len(body), virtual_size=len(body),
                           updated_at=_now())
                return 204, None
            if is_file and method == "GET":
                return 204, None
            if method == "GET":
                return 200, img
            if method == "DELETE":
                del state.images[image_id]
                return 204, None
            if method == "PATCH":
                for op in json.loads(body or b"[]"):
                    key = op["path"].lstrip("/")
                    if op["op"] in ("add", "replace"):
                        img[key] = op["value"]
                    elif op["op"] == "remove":
                        img.pop(key, None)
                img["updated_at"] = _now()
                return 200, img
    return 404, {"message": f"stand-in glance: {method} {path} unknown"}


def neutron(state, method, path, body, headers):
    if path == "":
        return 200, {"versions": [{"id": "v2.0", "status": "CURRENT",
                                   "links": [{"rel": "self", "href": "/v2.0/"}]}]}
    m = re.fullmatch(r"/v2\.0/([a-z_-]+?)(?:\.json)?", path)
    if method == "GET" and m:
        return 200, {m.group(1).replace("-", "_"): []}
    return 404, {"NeutronError": {"type": "HTTPNotFound", "detail": "",
                                  "message": f"stand-in neutron: {method} {path} unknown"}}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--glance-port", type=int, required=True)
    p.add_argument("--neutron-port", type=int, required=True)
    p.add_argument("--log", help="JSON-lines log of every request")
    args = p.parse_args()
    state = State(args.log)
    servers = [ThreadingHTTPServer(("127.0.0.1", args.glance_port), make_handler("glance", state)),
               ThreadingHTTPServer(("127.0.0.1", args.neutron_port), make_handler("neutron", state))]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for t in threads:
        t.start()
    print(f"stand-ins: glance 127.0.0.1:{args.glance_port}, neutron 127.0.0.1:{args.neutron_port}",
          flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
