// SPDX-License-Identifier: Apache-2.0
//! `state/instance_images.rs` (the system metadata ImagePropertiesWeigher reads)
//! against a cell database whose schema nova-manage built, and the image
//! properties we derive from those rows against what nova 34 itself derives from
//! the same database (`InstanceList.fill_metadata` + `Instance.image_meta`, run in
//! the venv's Python against the same cell database).

use nova_scheduler::state::instance_images;

use crate::nova_schema;
use nova_scheduler::weighers::image_props::props_from_system_metadata;
use sqlx::mysql::MySqlPool;
use sqlx::{AssertSqlSafe, Executor};
use std::collections::{BTreeMap, BTreeSet};

const I1: &str = "11111111-0000-4000-8000-000000000001";
const I2: &str = "11111111-0000-4000-8000-000000000002";
const I3: &str = "11111111-0000-4000-8000-000000000003";
const GONE: &str = "11111111-0000-4000-8000-000000000004";
const BARE: &str = "11111111-0000-4000-8000-000000000005";

const SEED: &[&str] = &[
    "INSERT INTO instances (uuid, host, node, deleted, image_ref) VALUES \
     ('11111111-0000-4000-8000-000000000001', 'h1', 'h1', 0, 'img-a'), \
     ('11111111-0000-4000-8000-000000000002', 'h1', 'h1', 0, 'img-b'), \
     ('11111111-0000-4000-8000-000000000003', 'h2', 'h2', 0, 'img-a'), \
     ('11111111-0000-4000-8000-000000000004', 'h1', 'h1', 4, 'img-a'), \
     ('11111111-0000-4000-8000-000000000005', 'h2', 'h2', 0, 'img-c')",
    "INSERT INTO instance_system_metadata (instance_uuid, `key`, value, deleted) VALUES \
     ('11111111-0000-4000-8000-000000000001', 'image_os_distro', 'linux', 0), \
     ('11111111-0000-4000-8000-000000000001', 'image_hw_architecture', 'AMD64', 0), \
     ('11111111-0000-4000-8000-000000000001', 'image_hw_numa_nodes', '2', 0), \
     ('11111111-0000-4000-8000-000000000001', 'image_hw_numa_cpus.0', '0-1', 0), \
     ('11111111-0000-4000-8000-000000000001', 'image_hw_numa_cpus.1', '2,3', 0), \
     ('11111111-0000-4000-8000-000000000001', 'image_trait:CUSTOM_B', 'required', 0), \
     ('11111111-0000-4000-8000-000000000001', 'image_trait:CUSTOM_A', 'required', 0), \
     ('11111111-0000-4000-8000-000000000001', 'owner_user_name', 'admin', 0), \
     ('11111111-0000-4000-8000-000000000002', 'image_hw_machine_type', 'pc', 1), \
     ('11111111-0000-4000-8000-000000000002', 'image_hw_machine_type', 'q35', 0), \
     ('11111111-0000-4000-8000-000000000002', 'image_hw_qemu_guest_agent', 'yes', 0), \
     ('11111111-0000-4000-8000-000000000002', 'image_vm_mode', 'hv', 0), \
     ('11111111-0000-4000-8000-000000000002', 'image_min_ram', '512', 0), \
     ('11111111-0000-4000-8000-000000000002', 'image_os_type', NULL, 0), \
     ('11111111-0000-4000-8000-000000000003', 'image_hw_vif_model', 'VirtualE1000', 0), \
     ('11111111-0000-4000-8000-000000000003', 'image_os_distro', 'windows', 0), \
     ('11111111-0000-4000-8000-000000000004', 'image_os_distro', 'linux', 0)",
];

/// nova's view: `{uuid: sorted [[key, str(value)], ...]}` of image properties.
const NOVA_SCRIPT: &str = r#"
import json, sys, warnings
warnings.simplefilter("ignore")
from nova import objects, context
objects.register_all()
import nova.conf
CONF = nova.conf.CONF
CONF([], project="nova")
CONF.set_override("connection", sys.argv[1], group="database")
ctxt = context.get_admin_context()
out = {}
for uuid in sys.argv[2:]:
    insts = objects.InstanceList(ctxt, objects=[objects.Instance(ctxt, uuid=uuid)])
    insts.fill_metadata()
    props = insts[0].image_meta.properties.to_dict()
    out[uuid] = sorted([k, str(v)] for k, v in props.items())
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_rows_nova_reads_and_derives_the_same_properties() {
    let venv = crate::venv::find();
    let prefix = nova_schema::tagged("nsrs_weigh_img");
    nova_schema::create(&venv, &prefix, &["cell1"])
        .await
        .expect("nova-manage schema");
    let db = format!("{prefix}_cell1");
    let pool = MySqlPool::connect(&nova_schema::sqlx_url(&db))
        .await
        .expect("cell db");
    for sql in SEED {
        pool.execute(AssertSqlSafe(*sql)).await.expect("seed");
    }

    let by_host = instance_images::instance_system_metadata_by_host(
        &pool,
        &["h1".to_string(), "h2".to_string(), "h3".to_string()],
    )
    .await
    .expect("load");

    // Hosts and instances: the deleted instance is not there, the one without rows
    // neither, nor the host without instances.
    let h1 = &by_host["h1"];
    let h2 = &by_host["h2"];
    assert_eq!(h1.keys().collect::<Vec<_>>(), vec![I1, I2]);
    assert_eq!(h2.keys().collect::<Vec<_>>(), vec![I3]);
    assert!(!by_host.contains_key("h3"));
    assert!(!h1.contains_key(GONE) && !h2.contains_key(BARE));
    // Row order kept (the deleted row first, then the live one); NULL values dropped.
    assert_eq!(
        h1[I2]
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>(),
        vec![
            "image_hw_machine_type=pc",
            "image_hw_machine_type=q35",
            "image_hw_qemu_guest_agent=yes",
            "image_vm_mode=hv",
            "image_min_ram=512",
        ]
    );

    // What we derive from the rows == what nova derives from the database.
    let mut ours: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for map in by_host.values() {
        for (uuid, rows) in map {
            let mut props = props_from_system_metadata(rows).expect("valid rows");
            props.sort();
            ours.insert(uuid.clone(), props);
        }
    }
    ours.insert(BARE.to_string(), Vec::new());
    let out = std::process::Command::new(venv.join("bin/python"))
        .arg("-c")
        .arg(NOVA_SCRIPT)
        .arg(nova_schema::sqla_url(&db))
        .args([I1, I2, I3, BARE])
        .env("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
        .output()
        .expect("python");
    assert!(
        out.status.success(),
        "nova script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let nova: BTreeMap<String, Vec<(String, String)>> =
        serde_json::from_slice(&out.stdout).expect("nova answer");
    assert_eq!(ours, nova);
    // And the cases that matter were really exercised.
    let i1: BTreeSet<String> = ours[I1].iter().map(|(k, v)| format!("{k}={v}")).collect();
    assert!(i1.contains("hw_architecture=x86_64"));
    assert!(i1.contains("hw_numa_cpus=[CoercedSet({0, 1}), CoercedSet({2, 3})]"));
    assert!(i1.contains("traits_required=['CUSTOM_B', 'CUSTOM_A']"));
    let i2: BTreeSet<String> = ours[I2].iter().map(|(k, v)| format!("{k}={v}")).collect();
    assert!(i2.contains("hw_machine_type=q35") && i2.contains("hw_vm_mode=hvm"));
    pool.close().await;
}
