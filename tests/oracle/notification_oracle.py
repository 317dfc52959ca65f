# SPDX-License-Identifier: Apache-2.0
"""nova 34's scheduler notifications, produced by nova's own code (tests/rpc/notifications.rs).

  notification_oracle.py cases SAMPLE_DIR
      Prints a JSON list of cases {name, spec, context, instance_uuid}: the spec_obj and
      context of each select_destinations request in SAMPLE_DIR, plus variants built with
      nova's objects (NUMA topology with CPU topology, PCI requests, server group,
      destination with cell and aggregates, retry, forced/ignored hosts, security groups,
      an image with tags). Every spec is a RequestSpec primitive made by nova.

  notification_oracle.py expect --host H < cases.json
      For each case, runs the statements of nova's SchedulerManager._select_destinations
      around a successful _schedule (legacy .start, versioned .start, spec.instance_uuid
      set, legacy .end, versioned .end) with oslo.messaging's `test` notification driver
      and notification_format = both, and prints what the driver received: a JSON list
      (per case) of {message, context, priority, topic}.

The context arrives as the RPC server hands it to nova: RequestContext.from_dict of the
request's _context_* keys.
"""

import json
import os
import sys
import tempfile
import warnings

warnings.simplefilter('ignore')


def _conf(host):
    from nova import conf as nova_conf
    fd, path = tempfile.mkstemp(suffix='.conf')
    with os.fdopen(fd, 'w') as f:
        f.write('[DEFAULT]\ntransport_url = fake:/\nhost = %s\n'
                '[oslo_messaging_notifications]\ndriver = test\n'
                '[notifications]\nnotification_format = both\n' % host)
    conf = nova_conf.CONF
    conf(['--config-file', path], project='nova')
    os.unlink(path)
    return conf


def _request_samples(sample_dir):
    out = []
    for name in sorted(os.listdir(sample_dir)):
        if not name.endswith('.request.json'):
            continue
        with open(os.path.join(sample_dir, name)) as f:
            body = json.load(f)['body']
        msg = json.loads(body['oslo.message'])
        ctx = {k[len('_context_'):]: v for k, v in msg.items()
               if k.startswith('_context_')}
        uuids = msg['args'].get('instance_uuids') or []
        out.append({'name': name[:-len('.request.json')],
                    'spec': msg['args']['spec_obj'], 'context': ctx,
                    'instance_uuid': uuids[-1] if uuids else None})
    return out


def _variants(base):
    """Specs built with nova's objects from the first sample's spec."""
    from nova import context as nova_context
    from nova import objects
    ctx = nova_context.get_admin_context()
    cases = []

    def add(name, mutate, instance_uuid='11111111-1111-4111-8111-111111111111'):
        spec = objects.RequestSpec.obj_from_primitive(base['spec'], ctx)
        mutate(spec)
        cases.append({'name': name, 'spec': spec.obj_to_primitive(),
                      'context': base['context'], 'instance_uuid': instance_uuid})

    def numa(spec):
        spec.numa_topology = objects.InstanceNUMATopology(
            emulator_threads_policy='share',
            cells=[objects.InstanceNUMACell(
                       id=0, cpuset=set([0, 1]), pcpuset=set(), memory=1024,
                       pagesize=None, cpu_policy='shared',
                       cpu_topology=objects.VirtCPUTopology(
                           sockets=1, cores=2, threads=1)),
                   objects.InstanceNUMACell(
                       id=1, cpuset=set(), pcpuset=set([2, 3]), memory=1024,
                       pagesize=2048, cpu_policy='dedicated',
                       cpu_thread_policy='prefer',
                       cpu_pinning_raw={'2': 5, '3': 6})])

    def pci(spec):
        spec.pci_requests = objects.InstancePCIRequests(requests=[
            objects.InstancePCIRequest(
                count=2, spec=[{'vendor_id': '8086', 'product_id': '1520'}],
                alias_name='nic1', request_id=None, numa_policy='preferred'),
            objects.InstancePCIRequest(
                count=1, spec=[{'vendor_id': '10de'}], alias_name=None,
                request_id='22222222-2222-4222-8222-222222222222')])

    def group(spec):
        spec.instance_group = objects.InstanceGroup(
            uuid='33333333-3333-4333-8333-333333333333', name='g1',
            user_id='u1', project_id='p1', policy='anti-affinity',
            rules={'max_server_per_host': '2'}, members=['m1', 'm2'],
            hosts=['h1'])

    def destination(spec):
        spec.requested_destination = objects.Destination(
            host='host-a', node='node-a',
            cell=objects.CellMapping(
                uuid='44444444-4444-4444-8444-444444444444', name='cell1',
                disabled=False, transport_url='rabbit://x', database_connection='mysql://x'),
            aggregates=['a1,a2', 'a3'], allow_cross_cell_move=False)

    def bare_destination(spec):
        spec.requested_destination = objects.Destination()
        spec.requested_destination.require_aggregates(['agg-x'])

    def retry(spec):
        spec.retry = objects.SchedulerRetries(
            num_attempts=2, hosts=objects.ComputeNodeList(objects=[
                objects.ComputeNode(host='h1', hypervisor_hostname='n1'),
                objects.ComputeNode(host='h2', hypervisor_hostname='n2')]))

    def forced(spec):
        spec.force_hosts = ['fh1', 'fh2']
        spec.force_nodes = ['fn1']
        spec.ignore_hosts = ['ih1']
        spec.num_instances = 3

    def security_groups(spec):
        spec.security_groups = objects.SecurityGroupList(objects=[
            objects.SecurityGroup(name='default',
                                  uuid='55555555-5555-4555-8555-555555555555'),
            objects.SecurityGroup(name='web')])

    def image(spec):
        spec.image.tags = ['t1', 't2']
        spec.image.protected = True
        spec.image.virtual_size = 123
        spec.image.properties.hw_numa_nodes = 2
        spec.image.properties.hw_cpu_policy = 'dedicated'

    def no_image(spec):
        spec.image = None
        spec.scheduler_hints = None

    for name, mutate in [('numa', numa), ('pci', pci), ('group', group),
                         ('destination', destination),
                         ('bare_destination', bare_destination),
                         ('retry', retry), ('forced', forced),
                         ('security_groups', security_groups),
                         ('image', image), ('no_image', no_image)]:
        add(name, mutate)
    add('numa_pci_no_uuids', lambda s: (numa(s), pci(s)), instance_uuid=None)
    return cases


def cases(sample_dir):
    samples = _request_samples(sample_dir)
    _conf('oracle-host')
    from nova import objects
    objects.register_all()
    return samples + _variants(samples[0])


def expect(host, all_cases):
    _conf(host)
    from nova import objects
    objects.register_all()
    from nova import conf as nova_conf
    from nova import rpc
    rpc.init(nova_conf.CONF)
    from nova.compute import utils as compute_utils
    from nova import context as nova_context
    from nova.objects import fields as fields_obj
    from oslo_messaging.notify import _impl_test

    notifier = rpc.get_notifier('scheduler')
    results = []
    for case in all_cases:
        ctx = nova_context.RequestContext.from_dict(case['context'])
        spec = objects.RequestSpec.obj_from_primitive(case['spec'], ctx)
        _impl_test.reset()
        for phase in ('start', 'end'):
            if phase == 'end' and case['instance_uuid']:
                spec.instance_uuid = case['instance_uuid']
                spec.obj_reset_changes(['instance_uuid'])
            notifier.info(
                ctx, 'scheduler.select_destinations.%s' % phase,
                {'request_spec': spec.to_legacy_request_spec_dict()})
            compute_utils.notify_about_scheduler_action(
                context=ctx, request_spec=spec,
                action=fields_obj.NotificationAction.SELECT_DESTINATIONS,
                phase=getattr(fields_obj.NotificationPhase, phase.upper()))
        got = []
        for ctxt, message, priority, retry in _impl_test.NOTIFICATIONS:
            got.append({'message': message, 'context': ctxt,
                        'priority': priority})
        results.append(got)
    return results


def main():
    mode = sys.argv[1]
    if mode == 'cases':
        out = cases(sys.argv[2])
    elif mode == 'expect':
        host = sys.argv[sys.argv.index('--host') + 1]
        out = expect(host, json.load(sys.stdin))
    else:
        raise SystemExit('unknown mode %s' % mode)
    from oslo_serialization import jsonutils
    sys.stdout.write(jsonutils.dumps(out))
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
