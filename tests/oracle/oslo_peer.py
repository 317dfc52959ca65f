# SPDX-License-Identifier: Apache-2.0
"""A real oslo.messaging peer (from the project venv) for tests/rpc_side_by_side.rs.

  oslo_peer.py server --config-file F --topic T --server S --name N
      An RPC server on topic T (as nova-scheduler's service would be) whose
      endpoint (version 4.5, like nova's SchedulerManager) answers ``whoami``
      with N. Prints READY once consuming; stops when stdin closes.

  oslo_peer.py client --config-file F --topic T --calls K
      Sends K ``whoami`` calls to topic T with RPCClient and prints the JSON list
      of answers.

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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('mode', choices=['server', 'client'])
    parser.add_argument('--config-file', required=True)
    parser.add_argument('--topic', required=True)
    parser.add_argument('--server', default='peerhost')
    parser.add_argument('--name', default='python')
    parser.add_argument('--calls', type=int, default=10)
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
    else:
        client = messaging.get_rpc_client(
            transport, messaging.Target(topic=args.topic, version='4.5'))
        answers = [client.prepare(timeout=30).call({}, 'whoami')
                   for _ in range(args.calls)]
        print(json.dumps(answers), flush=True)
    transport.cleanup()


if __name__ == '__main__':
    main()
