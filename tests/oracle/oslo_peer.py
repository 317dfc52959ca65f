# SPDX-License-Identifier: Apache-2.0
"""A real oslo.messaging peer (from the project venv) for tests/rpc/rpc_side_by_side.rs.

  oslo_peer.py server --config-file F --topic T --server S --name N
      An RPC server on topic T (as nova-scheduler's service would be) whose
      endpoint (version 4.5, like nova's SchedulerManager) answers ``whoami``
      with N. Prints READY once consuming; stops when stdin closes.

  oslo_peer.py client --config-file F --topic T --calls K
      Sends K ``whoami`` calls to topic T with RPCClient and prints the JSON list
      of answers.

  oslo_peer.py client ... --method M --args JSON --timeout S
                          [--call-monitor-timeout C]
      Calls M(**JSON) instead, with that timeout (and call-monitor timeout, as
      nova's conductor sets one for long calls); prints the JSON list of
      {"ok": answer} or {"error": exception class name}.

  oslo_peer.py stream --config-file F --topic T --method M --timeout S
      Calls M(seq=i) for i = 0, 1, ... until stdin closes, printing one JSON
      line per call: {"seq": i, "ok": answer} or {"seq": i, "error": class}.

F holds [DEFAULT] control_exchange / transport_url and the [oslo_messaging_rabbit]
options under test (durable, quorum, ...), exactly as a nova.conf would.
"""

import argparse
import json
import sys

from oslo_config import cfg
import oslo_messaging as messaging


class Endpoint(object):
    target = messaging.Target(version='4.5')

    def __init__(self, name):
        self.name = name

    def whoami(self, ctxt):
        return self.name


def stream(transport, args):
    import threading
    stop = threading.Event()

    def wait_stdin():
        sys.stdin.read()
        stop.set()

    threading.Thread(target=wait_stdin, daemon=True).start()
    client = messaging.get_rpc_client(
        transport, messaging.Target(topic=args.topic, version='4.5'),
        timeout=args.timeout)
    seq = 0
    while not stop.is_set():
        try:
            line = {'seq': seq, 'ok': client.call({}, args.method, seq=seq)}
        except Exception as e:  # noqa: BLE001 - reported to the test
            line = {'seq': seq, 'error': type(e).__name__}
        print(json.dumps(line), flush=True)
        seq += 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('mode', choices=['server', 'client', 'stream'])
    parser.add_argument('--config-file', required=True)
    parser.add_argument('--topic', required=True)
    parser.add_argument('--server', default='peerhost')
    parser.add_argument('--name', default='python')
    parser.add_argument('--calls', type=int, default=10)
    parser.add_argument('--method', default=None)
    parser.add_argument('--args', default='{}')
    parser.add_argument('--timeout', type=float, default=30)
    parser.add_argument('--call-monitor-timeout', type=float, default=None)
    args = parser.parse_args()

    # The global CONF, as nova uses: oslo.messaging registers some options there.
    conf = cfg.CONF
    conf(['--config-file', args.config_file], project='nsrs-peer')
    # transport_url and control_exchange are registered by oslo.messaging here
    # and read from F.
    transport = messaging.get_rpc_transport(conf)

    if args.mode == 'server':
        target = messaging.Target(topic=args.topic, server=args.server)
        server = messaging.get_rpc_server(
            transport, target, [Endpoint(args.name)])
        server.start()
        print('READY', flush=True)
        sys.stdin.read()
        server.stop()
        server.wait()
    elif args.mode == 'stream':
        stream(transport, args)
    elif args.method is None:
        client = messaging.get_rpc_client(
            transport, messaging.Target(topic=args.topic, version='4.5'))
        answers = [client.prepare(timeout=30).call({}, 'whoami')
                   for _ in range(args.calls)]
        print(json.dumps(answers), flush=True)
    else:
        client = messaging.get_rpc_client(
            transport, messaging.Target(topic=args.topic, version='4.5'),
            timeout=args.timeout,
            call_monitor_timeout=args.call_monitor_timeout)
        out = []
        for _ in range(args.calls):
            try:
                out.append({'ok': client.call(
                    {}, args.method, **json.loads(args.args))})
            except Exception as e:  # noqa: BLE001 - reported to the test
                out.append({'error': type(e).__name__, 'text': str(e)})
        print(json.dumps(out), flush=True)
    transport.cleanup()


if __name__ == '__main__':
    main()
