// SPDX-License-Identifier: Apache-2.0
//! Vectors from nova's `pci/test_stats.py`, written out by hand.

use super::*;
use crate::pci::pools::{PciStats, PciValue, Pool};
use crate::pci::request::PciRequest;

fn pool(vendor: &str, product: &str, numa: Option<i64>, count: i64, tags: &[(&str, &str)]) -> Pool {
    let mut attrs = BTreeMap::new();
    attrs.insert("vendor_id".into(), PciValue::Str(vendor.into()));
    attrs.insert("product_id".into(), PciValue::Str(product.into()));
    attrs.insert(
        "numa_node".into(),
        numa.map_or(PciValue::Null, PciValue::Int),
    );
    for (k, v) in tags {
        attrs.insert((*k).into(), PciValue::Str((*v).into()));
    }
    Pool { count, attrs }
}

fn req(vendor: &str, count: i64, policy: Option<&str>) -> PciRequest {
    let mut spec = BTreeMap::new();
    spec.insert("vendor_id".to_string(), Some(vendor.to_string()));
    PciRequest {
        count,
        spec: vec![spec],
        alias_name: Some("a".into()),
        request_id: Some("req".into()),
        numa_policy: policy.map(str::to_string),
        requester_id: None,
    }
}

/// v1 ×2 on node 0 (two addresses), v2 on node 1, v3 with no node.
fn fixture() -> PciStats {
    PciStats::new(vec![
        pool(
            "v1",
            "p1",
            Some(0),
            1,
            &[("address", "0000:00:01.0"), ("dev_type", "type-PCI")],
        ),
        pool(
            "v1",
            "p1",
            Some(0),
            1,
            &[("address", "0000:00:02.0"), ("dev_type", "type-PCI")],
        ),
        pool(
            "v2",
            "p2",
            Some(1),
            1,
            &[("address", "0000:00:03.0"), ("dev_type", "type-PCI")],
        ),
        pool(
            "v3",
            "p3",
            None,
            1,
            &[("address", "0000:00:04.0"), ("dev_type", "type-PCI")],
        ),
    ])
}

fn cells(ids: &[i64]) -> NumaContext {
    NumaContext {
        cell_ids: ids.to_vec(),
        host_cells: Some(vec![(0, Some(0)), (1, Some(1))]),
    }
}

#[test]
fn support_without_numa_and_no_mutation() {
    let stats = fixture();
    let ok = [req("v1", 1, None), req("v2", 1, None)];
    assert_eq!(stats.support_requests(&ok, None, None), Ok(true));
    let too_many = [req("v1", 1, None), req("v2", 3, None)];
    assert_eq!(stats.support_requests(&too_many, None, None), Ok(false));
    assert_eq!(stats, fixture());
    let mut applied = fixture();
    applied.apply_requests(&ok, None, None).expect("apply");
    assert_eq!(applied.pools.len(), 2);
}

#[test]
fn numa_policies() {
    let stats = fixture();
    let both = |p| [req("v1", 1, p), req("v2", 1, p)];
    assert_eq!(
        stats.support_requests(&both(None), None, Some(&cells(&[0]))),
        Ok(false)
    );
    assert_eq!(
        stats.support_requests(&both(Some("preferred")), None, Some(&cells(&[0]))),
        Ok(true)
    );
    let v3 = |p| [req("v3", 1, p)];
    assert_eq!(
        stats.support_requests(&v3(Some("legacy")), None, Some(&cells(&[0]))),
        Ok(true)
    );
    assert_eq!(
        stats.support_requests(&v3(Some("required")), None, Some(&cells(&[0]))),
        Ok(false)
    );
    // socket: v2 on node 1 is on socket 1; a guest on cell 1 gets it, on cell 0 not.
    assert_eq!(
        stats.support_requests(&[req("v2", 1, Some("socket"))], None, Some(&cells(&[1]))),
        Ok(true)
    );
    assert_eq!(
        stats.support_requests(&[req("v2", 1, Some("socket"))], None, Some(&cells(&[0]))),
        Ok(false)
    );
}

#[test]
fn placement_mapping_follows_rps() {
    let stats = PciStats::new(vec![
        pool(
            "8086",
            "vf",
            None,
            2,
            &[("dev_type", "type-VF"), ("rp_uuid", "pf1")],
        ),
        pool(
            "8086",
            "pf",
            None,
            1,
            &[("dev_type", "type-PF"), ("rp_uuid", "pf2")],
        ),
        pool(
            "8086",
            "pf",
            None,
            1,
            &[("dev_type", "type-PF"), ("rp_uuid", "pf3")],
        ),
        pool(
            "8086",
            "pci",
            None,
            1,
            &[("dev_type", "type-PCI"), ("rp_uuid", "pci1")],
        ),
    ]);
    let any = [req("8086", 1, None), req("8086", 1, None)];
    assert_eq!(
        stats.support_requests(&any, Some(&ProviderMapping::default()), None),
        Ok(true)
    );
    let mut pf = req("8086", 1, None);
    pf.spec[0].insert("dev_type".into(), Some("type-PF".into()));
    let mut mapping = ProviderMapping::default();
    mapping.insert(Some("req-0".into()), vec!["pf3".into()]);
    let mut applied = stats.clone();
    applied
        .apply_requests(std::slice::from_ref(&pf), Some(&mapping), None)
        .expect("apply");
    assert_eq!(applied.pools.len(), 3);
    assert!(applied.pools.iter().all(|p| !p.str_is("rp_uuid", "pf3")));
    let mut unknown = ProviderMapping::default();
    unknown.insert(Some("req-0".into()), vec!["pf4".into()]);
    assert_eq!(
        stats.support_requests(&[pf.clone()], Some(&unknown), None),
        Ok(false)
    );
    let mut none_key = ProviderMapping::default();
    none_key.insert(None, vec!["pf3".into()]);
    assert!(matches!(
        stats.support_requests(&[pf], Some(&none_key), None),
        Err(PciApplyError::Raised(_))
    ));
}

#[test]
fn unrequested_pf_vdpa_remote_managed_are_kept_back() {
    let stats = PciStats::new(vec![
        pool("8086", "1", None, 1, &[("dev_type", "type-PF")]),
        pool("8086", "1", None, 1, &[("dev_type", "vdpa")]),
        pool(
            "8086",
            "1",
            None,
            1,
            &[("dev_type", "type-VF"), ("remote_managed", "True")],
        ),
    ]);
    assert_eq!(
        stats.support_requests(&[req("8086", 1, None)], None, None),
        Ok(false)
    );
    let mut rm = req("8086", 1, None);
    rm.spec[0].insert("remote_managed".into(), Some("TRUE".into()));
    assert_eq!(stats.support_requests(&[rm], None, None), Ok(true));
    // A spec key `count` never matches (the pool's count is an int).
    let mut c = req("8086", 1, None);
    c.spec[0].insert("count".into(), None);
    assert_eq!(stats.support_requests(&[c], None, None), Ok(false));
}
