// SPDX-License-Identifier: Apache-2.0
use super::*;
use crate::model::{Destination, Flavor, ImageMeta, RequestLevelParams, RequestSpec};
use crate::placement::resource_request::allocation_candidates_query;
use serde_json::json;
use std::collections::BTreeSet;

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

struct Case<'a> {
    vcpus: i64,
    mem: i64,
    root: i64,
    eph: i64,
    swap: i64,
    bfv: bool,
    req: &'a [&'a str],
    forb: &'a [&'a str],
    aggs: Option<&'a [&'a str]>,
    forb_aggs: &'a [&'a str],
    hints: &'a [&'a str],
    image_traits: Option<&'a [&'a str]>,
}

const BASE: Case<'static> = Case {
    vcpus: 2,
    mem: 4096,
    root: 20,
    eph: 0,
    swap: 0,
    bfv: false,
    req: &[],
    forb: &[],
    aggs: None,
    forb_aggs: &[],
    hints: &[],
    image_traits: None,
};

fn spec(c: &Case<'_>) -> RequestSpec {
    let destination = (c.aggs.is_some() || !c.forb_aggs.is_empty()).then(|| Destination {
        aggregates: c
            .aggs
            .unwrap_or_default()
            .iter()
            .map(|s| s.to_string())
            .collect(),
        forbidden_aggregates: set(c.forb_aggs),
        ..Destination::default()
    });
    RequestSpec {
        flavor: Flavor {
            vcpus: c.vcpus,
            memory_mb: c.mem,
            root_gb: c.root,
            ephemeral_gb: c.eph,
            swap: c.swap,
            ..Flavor::default()
        },
        is_bfv: c.bfv,
        request_level_params: RequestLevelParams {
            root_required: set(c.req),
            root_forbidden: set(c.forb),
            same_subtree: Vec::new(),
        },
        requested_destination: destination,
        scheduler_hints: (!c.hints.is_empty()).then(|| {
            c.hints
                .iter()
                .map(|h| (h.to_string(), vec!["x".to_string()]))
                .collect()
        }),
        image: c.image_traits.map(|t| ImageMeta {
            properties: json!({ "traits_required": t })
                .as_object()
                .cloned()
                .unwrap_or_default(),
            ..ImageMeta::default()
        }),
        ..RequestSpec::default()
    }
}

fn query(c: &Case<'_>, max: u32) -> String {
    encode_query(
        &allocation_candidates_query(
            &spec(c),
            &QueryOptions {
                max_placement_results: max,
                ..QueryOptions::default()
            },
        )
        .expect("query"),
    )
}

/// A query as nova's `ResourceRequest.to_querystring` (`nova/scheduler/utils.py`)
/// writes it (keys sorted, form-urlencoded).
#[test]
fn boundary_facts_example_encoding() {
    let cn = "9a2ed6a1-3b6e-4a3c-9f1e-6f0f8c1d2e3f";
    let mut params: Vec<(String, String)> = [
        ("root_required", "OWNER_NOVA,!COMPUTE_STATUS_DISABLED"),
        ("resources", "DISK_GB:20,MEMORY_MB:2048,VCPU:2"),
        ("required", "HW_CPU_X86_AVX2"),
        ("member_of", "in:a1,a2"),
        ("member_of", "!in:f1"),
        ("in_tree", cn),
        ("limit", "1000"),
        ("group_policy", "none"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    params.sort();
    assert_eq!(
        encode_query(&params),
        format!(
            "group_policy=none&in_tree={cn}&limit=1000&member_of=%21in%3Af1&member_of=in%3Aa1%2Ca2\
             &required=HW_CPU_X86_AVX2&resources=DISK_GB%3A20%2CMEMORY_MB%3A2048%2CVCPU%3A2\
             &root_required=OWNER_NOVA%2C%21COMPUTE_STATUS_DISABLED"
        )
    );
}

/// The same example built from a RequestSpec, minus `group_policy` and `in_tree`
/// (extra specs and target hosts are not handled yet).
#[test]
fn boundary_facts_example_from_spec() {
    let c = Case {
        mem: 2048,
        req: &["OWNER_NOVA"],
        forb: &["COMPUTE_STATUS_DISABLED"],
        aggs: Some(&["a2,a1"]),
        forb_aggs: &["f1"],
        image_traits: Some(&["HW_CPU_X86_AVX2"]),
        ..BASE
    };
    assert_eq!(
        query(&c, 1000),
        "limit=1000&member_of=%21in%3Af1&member_of=in%3Aa1%2Ca2&required=HW_CPU_X86_AVX2\
         &resources=DISK_GB%3A20%2CMEMORY_MB%3A2048%2CVCPU%3A2\
         &root_required=OWNER_NOVA%2C%21COMPUTE_STATUS_DISABLED"
    );
}

/// Fixed vectors produced by nova 34's own code (`/work/cache/venv-probe`):
/// `nova.scheduler.utils.resources_from_request_spec(None, spec, None)
/// .to_querystring()` on `objects.RequestSpec(flavor=objects.Flavor(vcpus, memory_mb,
/// root_gb, ephemeral_gb, swap, extra_specs={}), request_level_params=
/// objects.RequestLevelParams(root_required, root_forbidden), is_bfv, requested_destination=
/// objects.Destination(aggregates, forbidden_aggregates), scheduler_hints,
/// image=objects.ImageMeta(properties=objects.ImageMetaProps(traits_required)))`.
#[test]
fn matches_nova_34_querystrings() {
    let cases: Vec<(Case<'_>, u32, &str)> = vec![
        (
            Case { req: &["OWNER_NOVA"], forb: &["COMPUTE_STATUS_DISABLED"], ..BASE },
            1000,
            "limit=1000&resources=DISK_GB%3A20%2CMEMORY_MB%3A4096%2CVCPU%3A2&root_required=OWNER_NOVA%2C%21COMPUTE_STATUS_DISABLED",
        ),
        (
            Case { vcpus: 4, mem: 8192, root: 40, eph: 10, swap: 1536, bfv: true, forb: &["COMPUTE_STATUS_DISABLED"], ..BASE },
            1000,
            "limit=1000&resources=DISK_GB%3A12%2CMEMORY_MB%3A8192%2CVCPU%3A4&root_required=%21COMPUTE_STATUS_DISABLED",
        ),
        (
            Case { vcpus: 1, mem: 512, root: 0, forb: &["COMPUTE_STATUS_DISABLED"], ..BASE },
            1000,
            "limit=1000&resources=MEMORY_MB%3A512%2CVCPU%3A1&root_required=%21COMPUTE_STATUS_DISABLED",
        ),
        (
            Case {
                aggs: Some(&["b2,a1", "c3"]),
                forb_aggs: &["f2", "f1"],
                req: &["OWNER_NOVA", "COMPUTE_IMAGE_TYPE_QCOW2"],
                forb: &["COMPUTE_STATUS_DISABLED"],
                ..BASE
            },
            1000,
            "limit=1000&member_of=%21in%3Af1%2Cf2&member_of=in%3Aa1%2Cb2&member_of=in%3Ac3&resources=DISK_GB%3A20%2CMEMORY_MB%3A4096%2CVCPU%3A2&root_required=COMPUTE_IMAGE_TYPE_QCOW2%2COWNER_NOVA%2C%21COMPUTE_STATUS_DISABLED",
        ),
        (
            Case { hints: &["group"], forb: &["COMPUTE_STATUS_DISABLED"], ..BASE },
            1000,
            "resources=DISK_GB%3A20%2CMEMORY_MB%3A4096%2CVCPU%3A2&root_required=%21COMPUTE_STATUS_DISABLED",
        ),
        (
            Case { hints: &["same_host", "foo"], ..BASE },
            1000,
            "resources=DISK_GB%3A20%2CMEMORY_MB%3A4096%2CVCPU%3A2",
        ),
        (
            Case { hints: &["foo"], swap: 1, ..BASE },
            1000,
            "limit=1000&resources=DISK_GB%3A21%2CMEMORY_MB%3A4096%2CVCPU%3A2",
        ),
        (
            Case { image_traits: Some(&["HW_CPU_X86_AVX2", "CUSTOM_A B"]), forb: &["COMPUTE_STATUS_DISABLED"], ..BASE },
            1000,
            "limit=1000&required=CUSTOM_A+B%2CHW_CPU_X86_AVX2&resources=DISK_GB%3A20%2CMEMORY_MB%3A4096%2CVCPU%3A2&root_required=%21COMPUTE_STATUS_DISABLED",
        ),
        (
            Case { vcpus: 0, mem: 0, root: 0, aggs: Some(&["z9"]), ..BASE },
            1000,
            "limit=1000&member_of=in%3Az9&resources=",
        ),
        (BASE, 7, "limit=7&resources=DISK_GB%3A20%2CMEMORY_MB%3A4096%2CVCPU%3A2"),
    ];
    for (i, (c, max, want)) in cases.iter().enumerate() {
        assert_eq!(query(c, *max), *want, "case {i}");
    }
}

#[test]
fn empty_flavor_without_destination_sends_no_group() {
    let c = Case {
        vcpus: 0,
        mem: 0,
        root: 0,
        ..BASE
    };
    assert_eq!(query(&c, 1000), "limit=1000");
}

#[test]
fn same_subtree_is_sorted() {
    let mut s = spec(&BASE);
    s.request_level_params.same_subtree = vec![vec!["_b".into(), "_a".into()]];
    let params = allocation_candidates_query(&s, &QueryOptions::default()).expect("query");
    assert!(params.contains(&("same_subtree".to_string(), "_a,_b".to_string())));
}

#[test]
fn encodes_like_python_quote_plus() {
    let params = vec![("k~._-".to_string(), "a b/c+d=é".to_string())];
    assert_eq!(encode_query(&params), "k~._-=a+b%2Fc%2Bd%3D%C3%A9");
}
