// SPDX-License-Identifier: Apache-2.0
use super::cell::Retained;
use super::watermarks::WATERMARK_MARGIN_SECS;
use super::*;
use crate::state::aggregates::AggregateCache;
use crate::state::compute::RatioDefaults;
use crate::state::queries::InstanceRow;
use crate::state::rows::{ComputeNodeRow, HostInstance, ServiceRow};
use chrono::Duration as ChronoDuration;
use chrono::TimeZone;

const CELL: &str = "11111111-1111-4111-8111-111111111111";

fn ratios() -> RatioDefaults {
    RatioDefaults {
        cpu: 4.0,
        ram: 1.0,
        disk: 1.0,
    }
}

fn t(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap()
}

fn service(id: i64, host: &str) -> ServiceRow {
    ServiceRow {
        id,
        host: Some(host.into()),
        updated_at: Some(t(0).naive_utc()),
        version: Some(66),
        ..ServiceRow::default()
    }
}

fn node(id: i64, host: &str, free_ram_mb: i64, updated: i64) -> ComputeNodeRow {
    ComputeNodeRow {
        id,
        host: Some(host.into()),
        hypervisor_hostname: Some(format!("{host}.node")),
        uuid: Some(format!("00000000-0000-4000-8000-{id:012}")),
        vcpus: 8,
        memory_mb: 16384,
        free_ram_mb: Some(free_ram_mb),
        local_gb: 100,
        free_disk_gb: Some(100),
        updated_at: Some(t(updated).naive_utc()),
        ..ComputeNodeRow::default()
    }
}

fn inst(host: &str, uuid: &str, flavor_id: Option<i64>) -> HostInstance {
    HostInstance {
        host: host.into(),
        uuid: uuid.into(),
        flavor_id,
    }
}

fn cell() -> CellCache {
    CellCache::from_rows(
        CELL,
        &ratios(),
        vec![service(1, "h1"), service(2, "h2")],
        vec![
            node(10, "h1", 8000, 0),
            node(20, "h2", 4000, 0),
            node(30, "orphan", 1, 0),
        ],
        vec![inst("h1", "i-a", Some(1)), inst("h1", "i-b", Some(2))],
        None,
    )
}

const SMALL: Consumption = Consumption {
    memory_mb: 512,
    root_gb: 1,
    ephemeral_gb: 0,
    vcpus: 1,
};

#[test]
fn joins_service_aggregates_instances_and_skips_orphans() {
    let c = cell();
    let aggs = AggregateCache::default();
    let h1 = c.host_state(10, &aggs, None).expect("h1");
    assert_eq!(h1.service.id, 1);
    assert_eq!(h1.free_ram_mb, 8000);
    assert_eq!(
        h1.instances.iter().cloned().collect::<Vec<_>>(),
        vec!["i-a".to_string(), "i-b".to_string()]
    );
    assert!(c.host_state(20, &aggs, None).unwrap().instances.is_empty());
    assert!(
        c.host_state(30, &aggs, None).is_none(),
        "no service: skipped as nova does"
    );
}

#[test]
fn retained_consumption_until_the_row_moves_or_ttl() {
    let mut c = cell();
    let aggs = AggregateCache::default();
    // Decisions carry sub-second times; rows are stamped to the second.
    let decided = t(5) + ChronoDuration::milliseconds(300);
    c.nodes.get_mut(&10).unwrap().retained.push(Retained {
        at: decided,
        what: SMALL,
    });
    let ttl = Duration::from_secs(120);
    let s = c.host_state(10, &aggs, Some((t(6), ttl))).unwrap();
    assert_eq!(s.free_ram_mb, 8000 - 512);
    assert_eq!(s.free_disk_mb, 100 * 1024 - 1024);
    assert_eq!(s.vcpus_used, 1);
    assert_eq!(s.num_instances, 1);
    // Without retention (or past the TTL) the row's values stand.
    assert_eq!(c.host_state(10, &aggs, None).unwrap().free_ram_mb, 8000);
    assert_eq!(
        c.host_state(10, &aggs, Some((t(200), ttl)))
            .unwrap()
            .free_ram_mb,
        8000
    );
    // A row stamped in an earlier second was written before the decision: it stays.
    c.upsert_node(CELL, &ratios(), node(10, "h1", 7900, 4), false);
    assert_eq!(c.nodes[&10].retained.len(), 1);
    assert_eq!(
        c.host_state(10, &aggs, Some((t(6), ttl)))
            .unwrap()
            .free_ram_mb,
        7900 - 512
    );
    // A row stamped in the decision's second may have been written after it (the
    // compute's claim, 0.7 s later) and show it: dropped, never counted twice.
    c.upsert_node(CELL, &ratios(), node(10, "h1", 7388, 5), false);
    assert!(c.nodes[&10].retained.is_empty());
    assert_eq!(
        c.host_state(10, &aggs, Some((t(6), ttl)))
            .unwrap()
            .free_ram_mb,
        7388
    );
    // A row of a later second likewise.
    c.nodes.get_mut(&10).unwrap().retained.push(Retained {
        at: decided,
        what: SMALL,
    });
    c.upsert_node(CELL, &ratios(), node(10, "h1", 7488, 6), false);
    assert!(c.nodes[&10].retained.is_empty());
    assert_eq!(
        c.host_state(10, &aggs, Some((t(7), ttl)))
            .unwrap()
            .free_ram_mb,
        7488
    );
}

#[test]
fn a_decision_on_the_second_is_shown_by_a_row_of_that_second() {
    // Decided at exactly t(5).000: a row stamped t(5) may be written after it.
    let mut c = cell();
    let aggs = AggregateCache::default();
    let ttl = Duration::from_secs(120);
    c.nodes.get_mut(&10).unwrap().retained.push(Retained {
        at: t(5),
        what: SMALL,
    });
    c.upsert_node(CELL, &ratios(), node(10, "h1", 7000, 4), false);
    assert_eq!(
        c.host_state(10, &aggs, Some((t(6), ttl)))
            .unwrap()
            .free_ram_mb,
        7000 - 512
    );
    c.upsert_node(CELL, &ratios(), node(10, "h1", 6488, 5), false);
    assert_eq!(
        c.host_state(10, &aggs, Some((t(6), ttl)))
            .unwrap()
            .free_ram_mb,
        6488
    );
}

#[test]
fn older_rows_never_replace_newer_ones_except_on_full_loads() {
    let mut c = cell();
    c.upsert_node(CELL, &ratios(), node(10, "h1", 100, 10), false);
    c.upsert_node(CELL, &ratios(), node(10, "h1", 200, 9), false);
    assert_eq!(c.nodes[&10].state.free_ram_mb, 100);
    c.upsert_node(CELL, &ratios(), node(10, "h1", 200, 9), true);
    assert_eq!(c.nodes[&10].state.free_ram_mb, 200);
}

#[test]
fn full_reload_keeps_pending_decisions() {
    let mut old = cell();
    for id in [10, 20] {
        old.nodes.get_mut(&id).unwrap().retained.push(Retained {
            at: t(5),
            what: SMALL,
        });
    }
    let fresh = CellCache::from_rows(
        CELL,
        &ratios(),
        vec![service(1, "h1"), service(2, "h2")],
        vec![node(10, "h1", 8000, 0), node(20, "h2", 3488, 7)],
        vec![],
        Some(&old),
    );
    assert_eq!(fresh.nodes[&10].retained.len(), 1);
    assert!(fresh.nodes[&20].retained.is_empty());
}

#[test]
fn instances_move_and_vanish() {
    let mut c = cell();
    c.apply_instance(InstanceRow {
        uuid: "i-a".into(),
        host: Some("h2".into()),
        flavor_id: Some(1),
        live: true,
    });
    assert_eq!(c.instances_by_host["h1"].len(), 1);
    assert!(c.instances_by_host["h2"].contains("i-a"));
    c.apply_instance(InstanceRow {
        uuid: "i-a".into(),
        host: Some("h2".into()),
        flavor_id: Some(1),
        live: false,
    });
    assert!(!c.instances_by_host.contains_key("h2"));
    assert!(!c.instance_host.contains_key("i-a"));
    // A request holding the old set is not affected by later changes.
    let held = Arc::clone(&c.instances_by_host["h1"]);
    c.remove_instance("h1", "i-b");
    assert!(held.contains("i-b"));
    assert!(!c.instances_by_host.contains_key("h1"));
}

#[test]
fn replace_host_instances_is_exact() {
    let mut c = cell();
    let wanted: BTreeSet<String> = ["i-b".to_string(), "i-c".to_string()].into();
    c.replace_host_instances("h1", &wanted, None);
    assert_eq!(*c.instances_by_host["h1"], wanted);
    assert!(!c.instance_host.contains_key("i-a"));
    assert_eq!(c.instance_host["i-c"], "h1");
}

#[test]
fn services_deleted_by_id_only() {
    let mut c = cell();
    c.upsert_service(service(7, "h1"));
    c.delete_service(&service(1, "h1"));
    assert_eq!(
        c.services["h1"].0, 7,
        "deleting the old row keeps the new one"
    );
    c.delete_service(&service(7, "h1"));
    assert!(!c.services.contains_key("h1"));
}

#[test]
fn node_uuid_index_follows_changes_and_deletes() {
    let mut c = cell();
    let mut renamed = node(10, "h1", 8000, 1);
    renamed.uuid = Some("new-uuid".into());
    c.upsert_node(CELL, &ratios(), renamed, false);
    assert_eq!(c.node_by_uuid.get("new-uuid"), Some(&10));
    assert!(!c
        .node_by_uuid
        .contains_key("00000000-0000-4000-8000-000000000010"));
    c.delete_node(10);
    assert!(!c.node_by_uuid.contains_key("new-uuid"));
    assert!(!c.nodes.contains_key(&10));
}

#[test]
fn instance_flavors_follow_rows_and_casts() {
    let mut c = cell();
    let aggs = crate::state::aggregates::AggregateCache::default();
    let flavors = |c: &CellCache, id: i64| {
        c.host_state(id, &aggs, None)
            .unwrap()
            .instance_flavor_ids
            .iter()
            .map(|(u, f)| (u.clone(), *f))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        flavors(&c, 10),
        vec![("i-a".into(), Some(1)), ("i-b".into(), Some(2))]
    );
    // A row moving to h2 takes its flavor along; a resize changes it.
    c.apply_instance(InstanceRow {
        uuid: "i-a".into(),
        host: Some("h2".into()),
        flavor_id: Some(5),
        live: true,
    });
    assert_eq!(flavors(&c, 10), vec![("i-b".into(), Some(2))]);
    assert_eq!(flavors(&c, 20), vec![("i-a".into(), Some(5))]);
    // A cast without the flavor keeps the known one; one with it replaces it.
    c.add_instance("h2", "i-a", None);
    assert_eq!(flavors(&c, 20), vec![("i-a".into(), Some(5))]);
    c.add_instance("h2", "i-a", Some(Some(6)));
    assert_eq!(flavors(&c, 20), vec![("i-a".into(), Some(6))]);
    // A new instance from a cast without the flavor is on the host, flavor unknown.
    c.add_instance("h2", "i-new", None);
    let h2 = c.host_state(20, &aggs, None).unwrap();
    assert!(h2.instances.contains("i-new"));
    assert!(!h2.instance_flavor_ids.contains_key("i-new"));
    // Leaving the host forgets the flavor; a sync drops what it does not list.
    c.remove_instance("h2", "i-a");
    assert!(flavors(&c, 20).is_empty());
    c.replace_host_instances("h1", &BTreeSet::new(), None);
    assert!(flavors(&c, 10).is_empty());
}

/// A row stamped at `stamp` (whole seconds, written `write_frac` into that second)
/// and committed `lag` seconds after its write, against passes every second that
/// read at half past: how many passes read it.
fn passes_reading(stamp: i64, write_frac: f64, lag: f64) -> usize {
    let at = |secs: i64| t(secs).naive_utc();
    let mut marks = Watermarks::after_full_read(at(0));
    let commit = stamp as f64 + write_frac + lag;
    let mut reads = 0;
    for now in 1..40 {
        let window = marks.window(at(now));
        let visible = commit <= now as f64 + 0.5;
        let s = at(stamp);
        let in_window = s > window.fresh || (s > window.lagged_from && s <= window.lagged_to);
        if visible && in_window {
            reads += 1;
        }
        marks = marks.after_pass(at(now));
    }
    reads
}

#[test]
fn every_row_committed_within_the_margin_is_read_one_to_three_times() {
    for stamp in -4..20 {
        for write_frac in [0.0, 0.4, 0.7] {
            for lag in [0.0, 0.05, 0.3, 0.9, 1.5, 2.6, 3.2, 3.9, 4.4] {
                let reads = passes_reading(stamp, write_frac, lag);
                assert!(
                    (1..=3).contains(&reads),
                    "stamp {stamp}, written at +{write_frac}, committed {lag} s later: read {reads} times"
                );
            }
        }
    }
    // A prompt commit is read by the pass after it, the overlap second and the
    // lagged slice.
    assert_eq!(passes_reading(10, 0.0, 0.0), 3);
    assert_eq!(passes_reading(10, 0.7, 0.0), 2);
}

#[test]
fn a_commit_later_than_the_margin_is_left_to_the_full_resync() {
    assert_eq!(
        passes_reading(10, 0.0, WATERMARK_MARGIN_SECS as f64 + 1.0),
        0
    );
}

#[test]
fn a_service_row_read_again_unchanged_leaves_the_table_alone() {
    let mut c = cell();
    c.changed_services.clear();
    c.rows_changed = false;
    c.upsert_service(service(1, "h1"));
    assert!(c.changed_services.is_empty());
    let mut beat = service(1, "h1");
    beat.last_seen_up = Some(t(10).naive_utc());
    c.upsert_service(beat);
    assert_eq!(
        c.changed_services.iter().collect::<Vec<_>>(),
        ["h1"],
        "a heartbeat changes the row"
    );
    assert!(!c.rows_changed);
    c.upsert_service(service(3, "h3"));
    assert!(c.rows_changed, "a new service is a new row");
}
