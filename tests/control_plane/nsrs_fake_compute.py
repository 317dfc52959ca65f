"""nova-compute (nova's own service and manager) with nova's fake virt driver,
extended for the control-plane tests. scripts/control_plane.sh starts it as

    python nsrs_fake_compute.py --config-file nova.conf --config-file computeN/nova-compute.conf

with `compute_driver = nsrs_fake.ControlPlaneFakeDriver`. nova loads drivers
only from `nova.virt.*`, so this launcher registers the class below as the
module `nova.virt.nsrs_fake` and then runs nova's `nova-compute` main().

The driver is nova's `fake.FakeDriverWithoutFakeNodes` (a node identity kept in
`compute_id` under `state_path`, so a restarted compute is the same compute
node, as the evacuate test needs) plus:
  - live migration completes at once: the source calls post_method, like
    nova's `FakeLiveMigrateDriver` once a migration is forced to complete;
  - a server whose metadata has `nsrs_fail_first_build` fails its first build
    attempt, wherever it lands, with ComputeResourcesUnavailable (nova's
    `FakeRescheduleDriver` does the same on one compute for every server;
    here one marker file per server, shared by all computes, limits it to the
    servers a test asks for). The compute that failed writes its host name
    into `$NSRS_CP_MARKERS/<server uuid>`.
"""

# nova's own first import decides eventlet vs native threads: keep it first.
from nova.cmd import compute as nova_compute_cmd  # noqa: I100

import os  # noqa: E402
import sys  # noqa: E402

import nova.conf  # noqa: E402
from nova import exception  # noqa: E402
from nova.virt import fake  # noqa: E402

CONF = nova.conf.CONF
FAIL_FIRST_BUILD = "nsrs_fail_first_build"


class ControlPlaneFakeDriver(fake.FakeDriverWithoutFakeNodes):

    def spawn(self, context, instance, image_meta, injected_files,
              admin_password, allocations, network_info=None,
              block_device_info=None, power_on=True, accel_info=None):
        if (instance.metadata or {}).get(FAIL_FIRST_BUILD):
            markers = os.environ.get("NSRS_CP_MARKERS") or os.path.join(CONF.state_path, "markers")
            os.makedirs(markers, exist_ok=True)
            try:
                fd = os.open(os.path.join(markers, instance.uuid), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                pass  # an earlier attempt failed already: build normally
            else:
                with os.fdopen(fd, "w") as f:
                    f.write(CONF.host)
                raise exception.ComputeResourcesUnavailable(
                    reason=f"{FAIL_FIRST_BUILD}: first build attempt fails on {CONF.host}")
        super().spawn(context, instance, image_meta, injected_files, admin_password,
                      allocations, network_info, block_device_info, power_on, accel_info)

    def live_migration(self, context, instance, dest, post_method, recover_method,
                       block_migration=False, migrate_data=None):
        post_method(context, instance, dest, block_migration, migrate_data)

    def post_live_migration(self, context, instance, block_device_info, migrate_data=None):
        # On the source, after the guest moved: forget it here (FakeLiveMigrateDriver).
        self.destroy(context, instance, network_info=None, block_device_info=block_device_info)


sys.modules["nova.virt.nsrs_fake"] = sys.modules[__name__]

if __name__ == "__main__":
    sys.argv[0] = os.path.join(os.path.dirname(sys.executable), "nova-compute")
    sys.exit(nova_compute_cmd.main())
