// SPDX-License-Identifier: Apache-2.0
use super::model::NameTable;
use super::*;
use std::collections::{BTreeMap, BTreeSet};

fn inv(total: i64, ratio: f32) -> Inventory {
    Inventory {
        total,
        reserved: 0,
        min_unit: 1,
        max_unit: total,
        step_size: 1,
        allocation_ratio: ratio,
        allocation_ratio_text: format!("{ratio}").parse().unwrap(),
    }
}

const A: &str = "00000000-0000-0000-0000-00000000000a";
const B: &str = "00000000-0000-0000-0000-00000000000b";
const AGG: &str = "00000000-0000-0000-0000-0000000000a1";

fn index() -> ProviderIndex {
    let mut index = ProviderIndex {
        resource_classes: NameTable::from_rows([(0, "VCPU".into()), (1, "MEMORY_MB".into())]),
        traits: NameTable::from_rows([(1, "COMPUTE_STATUS_DISABLED".into()), (2, "HW_X".into())]),
        aggregates: NameTable::from_rows([(7, AGG.into())]),
        ..ProviderIndex::default()
    };
    for (id, uuid) in [(1, A), (2, B)] {
        index.upsert(Provider {
            id,
            uuid: uuid.into(),
            root_id: id,
            inventories: BTreeMap::from([(0, inv(10, 0.7)), (1, inv(1000, 1.5))]),
            ..Provider::default()
        });
    }
    index.providers.get_mut(&2).unwrap().traits.insert(2);
    index.providers.get_mut(&1).unwrap().aggregates.insert(7);
    index.reshape();
    index
}

fn params(q: &[(&str, &str)]) -> LocalRequest {
    let pairs: Vec<(String, String)> = q
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    LocalRequest::from_params(&pairs).unwrap()
}

fn hosts(index: &ProviderIndex, q: &[(&str, &str)]) -> Vec<String> {
    let found = local_candidates(index, &params(q)).unwrap();
    let mut keys: Vec<String> = found.provider_uuids.clone();
    keys.sort();
    keys
}

#[test]
fn float_ratio_is_checked_as_mariadb_and_python_do() {
    let index = index();
    // 10 × 0.7f32 = 6.99999988 in SQL: 7 does not fit although int(10 × 0.7) = 7.
    assert!(hosts(&index, &[("resources", "VCPU:7")]).is_empty());
    assert_eq!(hosts(&index, &[("resources", "VCPU:6")]).len(), 2);
    let p = index.provider(A).unwrap();
    assert_eq!(p.inventories[&0].summary_capacity(), 7);
    assert_eq!(p.inventories[&1].summary_capacity(), 1500);
}

#[test]
fn traits_aggregates_and_tree_filters() {
    let index = index();
    assert_eq!(
        hosts(&index, &[("resources", "VCPU:1"), ("required", "HW_X")]),
        vec![B]
    );
    assert_eq!(
        hosts(&index, &[("resources", "VCPU:1"), ("required", "!HW_X")]),
        vec![A]
    );
    assert_eq!(
        hosts(
            &index,
            &[("resources", "VCPU:1"), ("member_of", &format!("in:{AGG}"))]
        ),
        vec![A]
    );
    assert_eq!(
        hosts(
            &index,
            &[
                ("resources", "VCPU:1"),
                ("member_of", &format!("!in:{AGG}"))
            ]
        ),
        vec![B]
    );
    assert_eq!(
        hosts(&index, &[("resources", "VCPU:1"), ("in_tree", B)]),
        vec![B]
    );
    assert_eq!(
        hosts(
            &index,
            &[("resources", "VCPU:1"), ("root_required", "HW_X")]
        ),
        vec![B]
    );
    // An aggregate Placement does not know matches nothing.
    let unknown = "00000000-0000-0000-0000-0000000000ff";
    assert!(hosts(&index, &[("resources", "VCPU:1"), ("member_of", unknown)]).is_empty());
}

#[test]
fn unsupported_shapes_and_worlds() {
    let q = |k: &str, v: &str| {
        vec![
            ("resources".to_string(), "VCPU:1".to_string()),
            (k.to_string(), v.to_string()),
        ]
    };
    let pairs = |q: &[(&str, &str)]| -> Vec<(String, String)> {
        q.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert!(LocalRequest::from_params(&q("resources1", "VCPU:1")).is_ok());
    // Placement's 400s: two granular groups without group_policy, a same_subtree
    // naming no group, a resourceless group outside same_subtree, any-of traits
    // before 1.39, a trait both required and forbidden, several member_of values
    // without `in:`, an unknown parameter.
    let two = [("resources1", "VCPU:1"), ("resources2", "VCPU:1")];
    assert!(LocalRequest::from_params(&pairs(&two)).is_err());
    let mut isolated = two.to_vec();
    isolated.push(("group_policy", "isolate"));
    assert!(LocalRequest::from_params(&pairs(&isolated)).is_ok());
    assert!(LocalRequest::from_params(&q("same_subtree", "_a,_b")).is_err());
    assert!(LocalRequest::from_params(&q("required_a", "HW_X")).is_err());
    let resourceless = [
        ("resources_a", "VCPU:1"),
        ("required_b", "HW_X"),
        ("same_subtree", "_a,_b"),
        ("group_policy", "none"),
    ];
    assert!(LocalRequest::from_params(&pairs(&resourceless)).is_ok());
    // A resourceless group counts as a granular group for group_policy.
    assert!(LocalRequest::from_params(&pairs(&resourceless[..3])).is_err());
    assert!(LocalRequest::from_params(&q("required", "in:HW_X,CUSTOM_A")).is_err());
    assert!(LocalRequest::from_params(&q("required", "HW_X,!HW_X")).is_err());
    assert!(LocalRequest::from_params(&q("member_of", &format!("{AGG},{AGG}"))).is_err());
    assert!(LocalRequest::from_params(&q("group_policy", "sometimes")).is_err());
    assert!(LocalRequest::from_params(&q("resources_with space", "VCPU:1")).is_err());
    let mut index = index();
    let req = params(&[("resources", "VCPU:1"), ("required", "CUSTOM_UNKNOWN")]);
    assert!(local_candidates(&index, &req).is_err());
    // A nested provider: answered by the general search.
    index.providers.get_mut(&2).unwrap().parent_id = Some(1);
    index.providers.get_mut(&2).unwrap().root_id = 1;
    index.reshape();
    assert!(local_candidates(&index, &params(&[("resources", "VCPU:1")])).is_ok());
}

#[test]
fn limit_keeps_the_first_matches_in_provider_id_order() {
    let mut index = index();
    let c = "00000000-0000-0000-0000-00000000000c";
    index.upsert(Provider {
        id: 3,
        uuid: c.into(),
        root_id: 3,
        inventories: BTreeMap::from([(0, inv(10, 1.0))]),
        ..Provider::default()
    });
    let all = [("resources", "VCPU:1")];
    assert_eq!(hosts(&index, &all), vec![A, B, c]);
    let first =
        local_candidates(&index, &params(&[("resources", "VCPU:1"), ("limit", "2")])).unwrap();
    assert_eq!(first.provider_uuids, vec![A, B]);
    assert_eq!(first.allocation_requests.len(), 2);
    // The limit counts matches, not providers looked at.
    let without_x = [
        ("resources", "VCPU:1"),
        ("required", "!HW_X"),
        ("limit", "1"),
    ];
    assert_eq!(hosts(&index, &without_x), vec![A]);
    index.providers.get_mut(&1).unwrap().traits.insert(2);
    index.reshape();
    assert_eq!(hosts(&index, &without_x), vec![c]);
    let beyond = [("resources", "VCPU:1"), ("limit", "1000")];
    assert_eq!(hosts(&index, &beyond), vec![A, B, c]);
}

#[test]
fn claims_count_until_refresh() {
    let mut index = index();
    assert!(index.apply_claim(&[(A.to_string(), vec![("VCPU".to_string(), 6)])]));
    assert_eq!(hosts(&index, &[("resources", "VCPU:1")]), vec![B]);
}

/// A live index over `index` whose loader never connects (no refresh in these tests).
fn live(index: ProviderIndex) -> LiveIndex {
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .connect_lazy("mysql://nobody@127.0.0.1:1/none")
        .unwrap();
    LiveIndex::with(index, IndexLoader::from_pool(pool))
}

fn request(rp: &str, vcpu: i64) -> serde_json::Value {
    serde_json::json!({"allocations": {rp: {"resources": {"VCPU": vcpu}}}})
}

#[tokio::test]
async fn tentative_claims_fill_the_room_and_revert() {
    // VCPU capacity 10 * 0.7: 6 as Placement's SQL sees it (the FLOAT 0.7 is below 0.7).
    let live = live(index());
    let first = live.try_claim(&request(A, 4)).expect("4 of 7 fit");
    assert_eq!(live.snapshot().provider(A).unwrap().used(0), 4);
    assert!(
        live.try_claim(&request(A, 4)).is_none(),
        "8 of 7 do not fit"
    );
    assert_eq!(live.snapshot().provider(A).unwrap().used(0), 4);
    assert!(live.try_claim(&request(A, 3)).is_none(), "7 do not fit");
    let second = live.try_claim(&request(A, 2)).expect("6 fit");
    live.revert(&first);
    assert_eq!(live.snapshot().provider(A).unwrap().used(0), 2);
    live.revert(&second);
    assert_eq!(live.snapshot().provider(A).unwrap().used(0), 0);
    // Unknown provider or class: nothing claimed.
    assert!(live.try_claim(&request("nope", 1)).is_none());
    let unknown_class = serde_json::json!({"allocations": {B: {"resources": {"GPU": 1}}}});
    assert!(live.try_claim(&unknown_class).is_none());
    assert_eq!(live.snapshot().provider(B).unwrap().used(0), 0);
}

#[tokio::test]
async fn a_claim_across_providers_is_all_or_nothing() {
    let live = live(index());
    let both = serde_json::json!({"allocations": {
        A: {"resources": {"VCPU": 2}}, B: {"resources": {"VCPU": 8}}}});
    assert!(live.try_claim(&both).is_none(), "B cannot take 8");
    assert_eq!(live.snapshot().provider(A).unwrap().used(0), 0);
}

/// What a refresh does to A's VCPU usage: Placement's `used`, recorded as replaced
/// for `ids` (every provider when `None`).
fn refreshed_vcpu_usage(live: &LiveIndex, used: i64, ids: Option<&BTreeSet<i64>>) {
    let mut index = live.write();
    index.providers.get_mut(&1).unwrap().usages.insert(0, used);
    live.mark_replaced(ids);
}

#[tokio::test]
async fn revert_after_a_usages_refresh_changes_nothing() {
    let live = live(index());
    let t = live.try_claim(&request(A, 4)).unwrap();
    // A refresh replaced the usages with Placement's, 5 of another consumer (which
    // never held the claim): taking the claim out would leave 1.
    refreshed_vcpu_usage(&live, 5, None);
    live.revert(&t);
    assert_eq!(live.snapshot().provider(A).unwrap().used(0), 5);
}

#[tokio::test]
async fn revert_skips_only_the_providers_whose_usages_were_replaced() {
    let live = live(index());
    let t = live
        .try_claim(&serde_json::json!({"allocations": {
            A: {"resources": {"VCPU": 2}}, B: {"resources": {"VCPU": 3}}}}))
        .unwrap();
    // A partial refresh re-summed A alone (its generation moved): Placement's 5.
    refreshed_vcpu_usage(&live, 5, Some(&BTreeSet::from([1])));
    live.revert(&t);
    assert_eq!(live.snapshot().provider(A).unwrap().used(0), 5);
    assert_eq!(live.snapshot().provider(B).unwrap().used(0), 0);
    // A claim made after that refresh is taken out of A as well.
    let later = live.try_claim(&request(A, 1)).unwrap();
    live.revert(&later);
    assert_eq!(live.snapshot().provider(A).unwrap().used(0), 5);
}

/// cn1 (DISK_GB) with two NUMA children (VCPU, MEMORY_MB) and a NIC (bandwidth,
/// CUSTOM_PHYSNET_A); cn2 with VCPU and MEMORY_MB only; a DISK_GB pool shared with
/// cn2 through an aggregate.
fn forest() -> ProviderIndex {
    let mut index = ProviderIndex {
        resource_classes: NameTable::from_rows([
            (0, "VCPU".into()),
            (1, "MEMORY_MB".into()),
            (2, "DISK_GB".into()),
            (3, "NET_BW_EGR_KILOBIT_PER_SEC".into()),
        ]),
        traits: NameTable::from_rows([
            (1, "CUSTOM_PHYSNET_A".into()),
            (2, "MISC_SHARES_VIA_AGGREGATE".into()),
        ]),
        aggregates: NameTable::from_rows([(7, AGG.into())]),
        ..ProviderIndex::default()
    };
    let provider = |id: i64, parent: Option<i64>, root: i64, inv: Vec<(i64, Inventory)>| Provider {
        id,
        uuid: format!("00000000-0000-0000-0000-{id:012}").into(),
        parent_id: parent,
        root_id: root,
        inventories: inv.into_iter().collect(),
        ..Provider::default()
    };
    index.upsert(provider(1, None, 1, vec![(2, inv(100, 1.0))]));
    index.upsert(provider(
        2,
        Some(1),
        1,
        vec![(0, inv(4, 1.0)), (1, inv(1000, 1.0))],
    ));
    index.upsert(provider(
        3,
        Some(1),
        1,
        vec![(0, inv(4, 1.0)), (1, inv(1000, 1.0))],
    ));
    index.upsert(provider(4, Some(1), 1, vec![(3, inv(1000, 1.0))]));
    index.upsert(provider(
        5,
        None,
        5,
        vec![(0, inv(8, 1.0)), (1, inv(2000, 1.0))],
    ));
    index.upsert(provider(6, None, 6, vec![(2, inv(1000, 1.0))]));
    index.providers.get_mut(&4).unwrap().traits.insert(1);
    index.providers.get_mut(&6).unwrap().traits.insert(2);
    index.providers.get_mut(&5).unwrap().aggregates.insert(7);
    index.providers.get_mut(&6).unwrap().aggregates.insert(7);
    index.reshape();
    index
}

/// Each candidate as `provider id:class:amount` items, sorted.
fn spread(index: &ProviderIndex, q: &[(&str, &str)]) -> Vec<String> {
    let found = local_candidates(index, &params(q)).unwrap();
    let mut out: Vec<String> = found
        .allocation_requests
        .iter()
        .map(|c| {
            let mut items: Vec<String> = c.json()["allocations"]
                .as_object()
                .unwrap()
                .iter()
                .flat_map(|(rp, a)| {
                    let id = index.by_uuid[rp.as_str()];
                    a["resources"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .map(move |(rc, n)| format!("{id}:{rc}:{n}"))
                })
                .collect();
            items.sort();
            items.join(" ")
        })
        .collect();
    out.sort();
    out
}

#[test]
fn the_unsuffixed_group_spreads_over_a_tree_and_sharing_providers() {
    let index = forest();
    let vcpu_mem = spread(&index, &[("resources", "MEMORY_MB:100,VCPU:2")]);
    assert_eq!(
        vcpu_mem,
        [
            "2:MEMORY_MB:100 2:VCPU:2",
            "2:MEMORY_MB:100 3:VCPU:2",
            "2:VCPU:2 3:MEMORY_MB:100",
            "3:MEMORY_MB:100 3:VCPU:2",
            "5:MEMORY_MB:100 5:VCPU:2",
        ]
    );
    // cn2 takes its disk from the pool; the pool alone has no VCPU.
    let with_disk = spread(&index, &[("resources", "DISK_GB:10,VCPU:1")]);
    assert_eq!(
        with_disk,
        [
            "1:DISK_GB:10 2:VCPU:1",
            "1:DISK_GB:10 3:VCPU:1",
            "5:VCPU:1 6:DISK_GB:10"
        ]
    );
    let found = local_candidates(&index, &params(&[("resources", "DISK_GB:10,VCPU:1")])).unwrap();
    // Summaries: every provider of each tree that gives resources.
    let mut summarized: Vec<i64> = found
        .provider_uuids
        .iter()
        .map(|u| index.by_uuid[u.as_str()])
        .collect();
    summarized.sort();
    assert_eq!(summarized, [1, 2, 3, 4, 5, 6]);
}

#[test]
fn granular_groups_follow_group_policy_and_capacity() {
    let index = forest();
    let isolate = [
        ("resources1", "VCPU:3"),
        ("resources2", "VCPU:3"),
        ("group_policy", "isolate"),
    ];
    assert_eq!(
        spread(&index, &isolate),
        ["2:VCPU:3 3:VCPU:3", "2:VCPU:3 3:VCPU:3"]
    );
    // Without isolation two groups may share a provider, within its capacity: 3 + 3
    // fits cn2's 8 VCPU, not a NUMA cell's 4.
    let none = [
        ("resources1", "VCPU:3"),
        ("resources2", "VCPU:3"),
        ("group_policy", "none"),
    ];
    assert_eq!(
        spread(&index, &none),
        ["2:VCPU:3 3:VCPU:3", "2:VCPU:3 3:VCPU:3", "5:VCPU:6"]
    );
}

#[test]
fn same_subtree_ties_a_resourceless_group_to_the_device() {
    let index = forest();
    let q = [
        ("resources_BW", "NET_BW_EGR_KILOBIT_PER_SEC:100"),
        ("required_NET", "CUSTOM_PHYSNET_A"),
        ("same_subtree", "_BW,_NET"),
        ("group_policy", "none"),
    ];
    let found = local_candidates(&index, &params(&q)).unwrap();
    assert_eq!(found.allocation_requests.len(), 1);
    let nic = "00000000-0000-0000-0000-000000000004";
    assert_eq!(
        found.allocation_requests[0].json()["mappings"],
        serde_json::json!({"_BW": [nic], "_NET": [nic]})
    );
    // Under isolate the resourceless group is a granular group like any other: it
    // may not share the NIC.
    let mut isolate = params(&q);
    isolate.group_policy = Some(GroupPolicy::Isolate);
    assert!(local_candidates(&index, &isolate)
        .unwrap()
        .allocation_requests
        .is_empty());
}

#[test]
fn answers_placement_leaves_to_set_order_go_to_placement() {
    let index = forest();
    let shared_class = params(&[("resources", "VCPU:1"), ("resources1", "VCPU:1")]);
    assert!(local_candidates(&index, &shared_class).is_err());
    let pool_alone = params(&[("resources", "DISK_GB:10"), ("resources1", "VCPU:1")]);
    assert!(local_candidates(&index, &pool_alone).is_err());
    // Under group_policy=none, or with the pool's disk the only group, it is answered.
    let mut none = shared_class.clone();
    none.group_policy = Some(GroupPolicy::None);
    assert!(local_candidates(&index, &none).is_ok());
    assert_eq!(spread(&index, &[("resources", "DISK_GB:10")]).len(), 2);
}
