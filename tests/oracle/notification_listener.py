# SPDX-License-Identifier: Apache-2.0
"""oslo.messaging's own notification listener, as ceilometer or searchlight run one
(tests/rpc/notifications.rs).

  notification_listener.py --config-file F --exchange E --topics T1,T2 --count N
      Listens on Target(topic=Ti, exchange=E) with get_notification_listener, prints
      READY once consuming, and prints a JSON list of the first N notifications received
      ({priority, ctxt, publisher_id, event_type, payload, metadata}), then exits.
      Exits with status 3 after --timeout seconds without N notifications.
"""

import argparse
import json
import sys
import threading
import warnings

warnings.simplefilter('ignore')

from oslo_config import cfg  # noqa: E402
import oslo_messaging as messaging  # noqa: E402


class Endpoint(object):
    def __init__(self, want):
        self.want = want
        self.got = []
        self.done = threading.Event()
        self.lock = threading.Lock()

    def _record(self, priority, ctxt, publisher_id, event_type, payload,
                metadata):
        with self.lock:
            self.got.append({'priority': priority, 'ctxt': ctxt,
                             'publisher_id': publisher_id,
                             'event_type': event_type, 'payload': payload,
                             'metadata': metadata})
            if len(self.got) >= self.want:
                self.done.set()
        return messaging.NotificationResult.HANDLED

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        return self._record('info', ctxt, publisher_id, event_type, payload,
                            metadata)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--config-file', required=True)
    parser.add_argument('--exchange', required=True)
    parser.add_argument('--topics', required=True)
    parser.add_argument('--count', type=int, required=True)
    parser.add_argument('--timeout', type=float, default=30.0)
    args = parser.parse_args()

    conf = cfg.CONF
    conf(['--config-file', args.config_file], project='nsrs-listener')
    transport = messaging.get_notification_transport(conf)
    targets = [messaging.Target(topic=t, exchange=args.exchange)
               for t in args.topics.split(',')]
    endpoint = Endpoint(args.count)
    listener = messaging.get_notification_listener(
        transport, targets, [endpoint], executor='threading')
    listener.start()
    print('READY', flush=True)
    ok = endpoint.done.wait(args.timeout)
    listener.stop()
    listener.wait()
    transport.cleanup()
    if not ok:
        sys.stderr.write('received %d of %d notifications\n'
                         % (len(endpoint.got), args.count))
        print(json.dumps(endpoint.got), flush=True)
        sys.exit(3)
    print(json.dumps(endpoint.got), flush=True)


if __name__ == '__main__':
    main()
