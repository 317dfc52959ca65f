// SPDX-License-Identifier: Apache-2.0
use super::*;
use chrono::NaiveDate;

const RATIOS: RatioDefaults = RatioDefaults {
    cpu: 4.0,
    ram: 1.0,
    disk: 1.0,
};

fn node() -> ComputeNodeRow {
    ComputeNodeRow {
        id: 7,
        host: Some("h1".into()),
        hypervisor_hostname: Some("h1.example".into()),
        uuid: Some("cn-1".into()),
        vcpus: 16,
        vcpus_used: 4,
        memory_mb: 32768,
        free_ram_mb: Some(-512),
        local_gb: 500,
        local_gb_used: 100,
        free_disk_gb: Some(400),
        disk_available_least: Some(350),
        hypervisor_type: Some("QEMU".into()),
        hypervisor_version: Some(8002000),
        cpu_info: Some(r#"{"arch": "x86_64"}"#.into()),
        host_ip: Some("192.0.2.1".into()),
        supported_instances: Some(r#"[["x86_64", "kvm", "hvm"], ["i686", "qemu", "hvm"]]"#.into()),
        stats: Some(r#"{"num_instances": "3", "io_workload": "2", "failed_builds": "1", "num_proj_p": "3", "n": 5, "f": 1.0, "z": null}"#.into()),
        numa_topology: Some(r#"{"nova_object.name": "NUMATopology"}"#.into()),
        updated_at: NaiveDate::from_ymd_opt(2026, 1, 2)
            .and_then(|d| d.and_hms_opt(3, 4, 5)),
        ..ComputeNodeRow::default()
    }
}

fn build(node: ComputeNodeRow) -> HostState {
    let svc = ServiceRow {
        id: 3,
        host: Some("h1".into()),
        disabled: Some(true),
        disabled_reason: Some("maintenance".into()),
        version: Some(73),
        ..ServiceRow::default()
    };
    host_state(
        node,
        &svc,
        "cell-a",
        &RATIOS,
        Vec::new(),
        Arc::default(),
        &mut RowInterner::default(),
    )
}

#[test]
fn copies_resources_and_stats() {
    let h = build(node());
    assert_eq!((&*h.host, &*h.nodename), ("h1", "h1.example"));
    assert_eq!(h.uuid.as_deref(), Some("cn-1"));
    assert_eq!(&*h.cell_uuid, "cell-a");
    assert_eq!(h.free_ram_mb, -512);
    assert_eq!(h.free_disk_mb, 350 * 1024);
    assert_eq!(h.disk_mb_used, 100 * 1024);
    assert_eq!((h.vcpus_total, h.vcpus_used), (16, 4));
    assert_eq!((h.num_instances, h.num_io_ops, h.failed_builds), (3, 2, 1));
    assert_eq!(h.stats.get("n").map(|v| &**v), Some("5"));
    assert_eq!(h.stats.get("f").map(|v| &**v), Some("1.0"));
    assert!(!h.stats.contains_key("z"));
    assert_eq!(h.supported_instances[1], vec!["i686", "qemu", "hvm"]);
    assert_eq!(h.cpu_info.as_deref(), Some(r#"{"arch": "x86_64"}"#));
    assert!(h.numa_topology.is_some());
    assert!(h.pci_stats.is_none() && h.metrics.is_none());
    assert_eq!(h.hypervisor_version, Some(8002000));
    assert_eq!(
        h.updated.map(|t| t.to_rfc3339()).as_deref(),
        Some("2026-01-02T03:04:05+00:00")
    );
    assert!(h.service.disabled);
    assert_eq!(h.service.version, 73);
}

#[test]
fn disk_available_least_only_lowers_free_disk() {
    let mut n = node();
    n.disk_available_least = Some(900);
    assert_eq!(build(n.clone()).free_disk_mb, 400 * 1024);
    n.disk_available_least = None;
    assert_eq!(build(n).free_disk_mb, 400 * 1024);
}

#[test]
fn null_free_disk_keeps_defaults() {
    let mut n = node();
    n.free_disk_gb = None;
    let h = build(n);
    assert_eq!(h.uuid, None);
    assert_eq!((h.free_ram_mb, h.vcpus_total, h.num_instances), (0, 0, 0));
    assert_eq!(&*h.host, "h1");
    assert!(h.stats.is_empty());
}

#[test]
fn ratios_fall_back_for_null_and_zero() {
    let mut n = node();
    n.cpu_allocation_ratio = Some(0.0);
    n.ram_allocation_ratio = None;
    n.disk_allocation_ratio = Some(2.5);
    let h = build(n);
    assert_eq!(
        (
            h.cpu_allocation_ratio,
            h.ram_allocation_ratio,
            h.disk_allocation_ratio
        ),
        (4.0, 1.0, 2.5)
    );
}

#[test]
fn configured_ratio_wins_over_initial_unless_zero() {
    let resolver: crate::state::CellUrlResolver = Arc::new(|u| Ok(u.to_string()));
    let mut opts = StateOptions::new("mysql://a", "mysql://b", resolver);
    opts.cpu_allocation_ratio = Some(16.0);
    opts.ram_allocation_ratio = Some(0.0);
    let r = RatioDefaults::from_options(&opts);
    assert_eq!((r.cpu, r.ram, r.disk), (16.0, 1.0, 1.0));
}

#[test]
fn bad_json_and_bad_stats_are_tolerated() {
    let mut n = node();
    n.stats = Some(r#"{"num_instances": "x"}"#.into());
    n.supported_instances = Some("not json".into());
    n.metrics = Some(String::new());
    let h = build(n);
    assert_eq!(h.num_instances, 0);
    assert!(h.supported_instances.is_empty());
    assert!(h.metrics.is_none());
}

/// `node` as a cache reads it (no service, aggregates or instances yet), its shared
/// values taken from `texts`.
fn cached(node: ComputeNodeRow, texts: &mut RowInterner) -> HostState {
    host_state(
        node,
        &ServiceRow::default(),
        "cell-a",
        &RATIOS,
        Vec::new(),
        Arc::default(),
        texts,
    )
}

#[test]
fn equal_pci_stats_texts_share_one_parse_until_no_node_holds_it() {
    let empty = r#"{"nova_object.name": "PciDevicePoolList", "nova_object.data": {"objects": []}}"#;
    let one_pool = r#"[{"vendor_id": "8086", "product_id": "1520", "count": 2, "numa_node": 0}]"#;
    let mut pci = RowInterner::default();
    let with = |text: Option<&str>, pci: &mut RowInterner| {
        cached(
            ComputeNodeRow {
                pci_stats: text.map(str::to_string),
                ..node()
            },
            pci,
        )
    };
    let a = with(Some(empty), &mut pci);
    let b = with(Some(empty), &mut pci);
    let c = with(Some(one_pool), &mut pci);
    let shared = |x: &HostState, y: &HostState| {
        Arc::ptr_eq(x.pci_stats.as_ref().unwrap(), y.pci_stats.as_ref().unwrap())
            && Arc::ptr_eq(x.pci.as_ref().unwrap(), y.pci.as_ref().unwrap())
    };
    assert!(shared(&a, &b));
    assert!(!shared(&a, &c));
    // Each equals what parsing the text alone gives.
    for (h, text) in [(&a, empty), (&c, one_pool)] {
        let raw: Value = serde_json::from_str(text).unwrap();
        assert_eq!(h.pci_stats.as_deref(), Some(&raw));
        assert_eq!(**h.pci.as_ref().unwrap(), PciStats::from_raw(Some(&raw)));
    }
    // A request consuming from one host's pools copies them first.
    let mut consumed = c.clone();
    let before = (**c.pci.as_ref().unwrap()).clone();
    *Arc::make_mut(consumed.pci.as_mut().unwrap()) = PciStats::default();
    assert_eq!(**c.pci.as_ref().unwrap(), before);
    // NULL and text that is not JSON: no raw value, no pools.
    for text in [None, Some("{not json")] {
        let h = with(text, &mut pci);
        assert_eq!(h.pci_stats, None);
        assert_eq!(**h.pci.as_ref().unwrap(), PciStats::default());
    }
    assert_eq!(pci.pci_len(), 3);
    drop((a, c, consumed));
    pci.prune();
    assert_eq!(pci.pci_len(), 1, "only the text b still holds is kept");
    drop(b);
    pci.prune();
    assert_eq!(pci.pci_len(), 0);
}

#[test]
fn shared_column_values_are_held_once_until_no_node_holds_them() {
    let mut texts = RowInterner::default();
    let mut with = |host: &str, stats: &str| {
        cached(
            ComputeNodeRow {
                host: Some(host.into()),
                hypervisor_hostname: Some(host.into()),
                stats: Some(stats.into()),
                metrics: Some("[]".into()),
                ..node()
            },
            &mut texts,
        )
    };
    let a = with("a", r#"{"num_proj_p": "1", "io_workload": "0"}"#);
    let b = with("b", r#"{"num_proj_p": "1", "io_workload": 2}"#);
    let same = |x: &Arc<str>, y: &Arc<str>| Arc::ptr_eq(x, y);
    assert!(same(&a.cell_uuid, &b.cell_uuid));
    assert!(same(
        a.cpu_info.as_ref().unwrap(),
        b.cpu_info.as_ref().unwrap()
    ));
    assert!(same(
        a.hypervisor_type.as_ref().unwrap(),
        b.hypervisor_type.as_ref().unwrap()
    ));
    assert!(Arc::ptr_eq(&a.supported_instances, &b.supported_instances));
    assert!(Arc::ptr_eq(
        a.metrics.as_ref().unwrap(),
        b.metrics.as_ref().unwrap()
    ));
    let (ka, va) = a.stats.get_key_value("num_proj_p").unwrap();
    let (kb, vb) = b.stats.get_key_value("num_proj_p").unwrap();
    assert!(same(ka, kb) && same(va, vb));
    // Values are what parsing each row alone gives.
    assert_eq!(a.stats.get("io_workload").map(|v| &**v), Some("0"));
    assert_eq!(b.stats.get("io_workload").map(|v| &**v), Some("2"));
    assert_eq!(b.num_io_ops, 2);
    assert_eq!(&**a.cpu_info.as_ref().unwrap(), r#"{"arch": "x86_64"}"#);
    assert_eq!(a.supported_instances.len(), 2);
    assert_eq!(**a.metrics.as_ref().unwrap(), serde_json::json!([]));
    // The node name is held once for both fields.
    assert!(same(&a.nodename, a.hypervisor_hostname.as_ref().unwrap()));

    let held = texts.len();
    drop(a);
    texts.prune();
    assert!(texts.len() < held, "the values only a held are forgotten");
    assert!(
        texts.strings.contains("num_proj_p"),
        "b still holds this key"
    );
    drop(b);
    texts.prune();
    assert_eq!(texts.len(), 0);
}
