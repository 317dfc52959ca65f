// SPDX-License-Identifier: Apache-2.0
//! Hand-written cases; the differential test against nova's own code is
//! `tests/differential/differential_resource_request.rs`.
use super::*;
use crate::model::{Destination, Flavor, ImageMeta};
use serde_json::json;

fn spec(vcpus: i64, extra: &[(&str, &str)]) -> RequestSpec {
    RequestSpec {
        flavor: Flavor {
            name: Some("f".into()),
            vcpus,
            memory_mb: 1024,
            root_gb: 10,
            extra_specs: extra
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Flavor::default()
        },
        ..RequestSpec::default()
    }
}

fn qs(spec: &mut RequestSpec, pinning: bool) -> String {
    resources_from_request_spec(spec, &QueryOptions::default(), pinning, None)
        .expect("request")
        .to_querystring()
}

#[test]
fn dedicated_policy_asks_pcpu_and_the_fallback_asks_vcpu() {
    let mut s = spec(
        4,
        &[
            ("hw:cpu_policy", "dedicated"),
            ("hw:emulator_threads_policy", "isolate"),
        ],
    );
    let rr = resources_from_request_spec(&mut s, &QueryOptions::default(), true, None).unwrap();
    assert!(rr.cpu_pinning_requested);
    assert_eq!(
        rr.to_querystring(),
        "limit=1000&resources=DISK_GB%3A10%2CMEMORY_MB%3A1024%2CPCPU%3A5"
    );
    assert_eq!(
        qs(&mut s, false),
        "limit=1000&resources=DISK_GB%3A10%2CMEMORY_MB%3A1024%2CVCPU%3A4"
    );
}

#[test]
fn mixed_policy_splits_by_the_dedicated_mask() {
    let mut s = spec(
        4,
        &[("hw:cpu_policy", "mixed"), ("hw:cpu_dedicated_mask", "^0")],
    );
    assert_eq!(
        qs(&mut s, true),
        "limit=1000&resources=DISK_GB%3A10%2CMEMORY_MB%3A1024%2CPCPU%3A3%2CVCPU%3A1"
    );
}

#[test]
fn granular_groups_and_group_policy() {
    let mut s = spec(
        2,
        &[
            ("resources1:CUSTOM_A", "1"),
            ("trait1:CUSTOM_T", "required"),
            ("resources_x:VGPU", "2"),
            ("trait:HW_CPU_X86_AVX2", "forbidden"),
            ("resources2:BOGUS", "1"),
        ],
    );
    // Two suffixed groups left, three came from the flavor (one was emptied):
    // nova leaves group_policy unset and Placement answers 400.
    assert_eq!(
        qs(&mut s, true),
        "limit=1000&required=%21HW_CPU_X86_AVX2&required1=CUSTOM_T\
         &resources=DISK_GB%3A10%2CMEMORY_MB%3A1024%2CVCPU%3A2\
         &resources1=CUSTOM_A%3A1&resources_x=VGPU%3A2"
    );
    s.requested_resources = vec![crate::model::RequestGroup {
        requester_id: Some("port-1".into()),
        resources: [("NET_BW_EGR_KILOBIT_PER_SEC".to_string(), 10)].into(),
        ..Default::default()
    }];
    s.flavor.extra_specs.remove("resources2:BOGUS");
    s.flavor.extra_specs.remove("resources_x:VGPU");
    assert!(qs(&mut s, true).starts_with("group_policy=none&"));
}

#[test]
fn resources_sort_as_formatted_strings() {
    let mut s = spec(
        1,
        &[("resources:CUSTOM_A", "1"), ("resources:CUSTOM_A0", "2")],
    );
    assert!(qs(&mut s, true).contains("resources=CUSTOM_A0%3A2%2CCUSTOM_A%3A1%2C"));
}

#[test]
fn disk_beyond_i64_is_asked_as_python_sums_it() {
    // root_gb + ephemeral_gb + ceil(swap / 1024) is a Python int: 2**64 - 1 here.
    let mut s = spec(1, &[]);
    s.flavor.root_gb = i64::MAX;
    s.flavor.ephemeral_gb = i64::MAX;
    s.flavor.swap = 1;
    assert!(qs(&mut s, true).contains("DISK_GB%3A18446744073709551615%2C"));
    // Below i64::MIN: a negative amount, left out as nova leaves it out.
    s.flavor.root_gb = i64::MIN;
    s.flavor.ephemeral_gb = -1;
    s.flavor.swap = 0;
    assert!(!qs(&mut s, true).contains("DISK_GB"));
}

#[test]
fn target_node_sets_in_tree_and_several_drop_limit() {
    let mut s = spec(1, &[]);
    s.force_hosts = vec!["h1".into()];
    s.requested_destination = Some(Destination::default());
    let node = |n: &str| TargetNode {
        uuid: format!("uuid-{n}"),
        host: "h1".into(),
        hypervisor_hostname: n.into(),
    };
    let one = [node("n1")];
    let rr =
        resources_from_request_spec(&mut s, &QueryOptions::default(), true, Some(&one)).unwrap();
    assert!(rr.to_querystring().contains("in_tree=uuid-n1"));
    let dest = s.requested_destination.clone().unwrap();
    assert_eq!(
        (dest.host.as_deref(), dest.node.as_deref()),
        (Some("h1"), Some("n1"))
    );
    let two = [node("n1"), node("n2")];
    let mut s2 = spec(1, &[]);
    s2.force_hosts = vec!["h1".into()];
    let rr =
        resources_from_request_spec(&mut s2, &QueryOptions::default(), true, Some(&two)).unwrap();
    assert_eq!(rr.limit, None);
    let err = resources_from_request_spec(&mut s2, &QueryOptions::default(), true, Some(&[]))
        .unwrap_err();
    assert_eq!(
        err.message,
        "No valid host was found. No such host - host: h1 node: None "
    );
}

#[test]
fn image_and_translations() {
    let mut s = spec(
        1,
        &[("hw:tpm_version", "2.0"), ("hw:pmem", "small, small,big")],
    );
    s.image = Some(ImageMeta {
        name: Some("img".into()),
        properties: json!({"os_secure_boot": "required", "hw_tpm_model": "tpm-crb"})
            .as_object()
            .cloned()
            .unwrap(),
        ..ImageMeta::default()
    });
    assert_eq!(
        qs(&mut s, true),
        "limit=1000&required=COMPUTE_SECURITY_TPM_2_0%2CCOMPUTE_SECURITY_TPM_CRB%2C\
         COMPUTE_SECURITY_UEFI_SECURE_BOOT&resources=CUSTOM_PMEM_NAMESPACE_BIG%3A1%2C\
         CUSTOM_PMEM_NAMESPACE_SMALL%3A2%2CDISK_GB%3A10%2CMEMORY_MB%3A1024%2CVCPU%3A1"
    );
}

#[test]
fn extra_spec_keys() {
    assert_eq!(
        parse_extra_spec_key("resources:VCPU"),
        Some((true, None, "VCPU"))
    );
    assert_eq!(
        parse_extra_spec_key("trait_a-1:X:Y"),
        Some((false, Some("_a-1"), "X:Y"))
    );
    assert_eq!(parse_extra_spec_key("trait:X\n"), Some((false, None, "X")));
    assert_eq!(parse_extra_spec_key("trait:X\nY"), None);
    assert_eq!(parse_extra_spec_key("trait.1:X"), None);
    assert_eq!(
        parse_extra_spec_key(&format!("trait{}:X", "a".repeat(65))),
        None
    );
    assert_eq!(parse_extra_spec_key("hw:cpu_policy"), None);
}

#[test]
fn conflicts_fail_with_nova_classes() {
    let mut s = spec(2, &[("hw:cpu_policy", "shared")]);
    s.image = Some(ImageMeta {
        properties: json!({"hw_cpu_policy": "dedicated"})
            .as_object()
            .cloned()
            .unwrap(),
        ..ImageMeta::default()
    });
    let err =
        resources_from_request_spec(&mut s, &QueryOptions::default(), true, None).unwrap_err();
    assert_eq!(err.class, "ImageCPUPinningForbidden");
    assert_eq!(err.code(), 403);
    let mut s = spec(2, &[("hw:cpu_policy", "bogus")]);
    let err =
        resources_from_request_spec(&mut s, &QueryOptions::default(), true, None).unwrap_err();
    assert_eq!(
        err.message,
        "CPU policy requested from 'flavor extra specs' is invalid, given: 'bogus', available: \
         '('dedicated', 'shared', 'mixed')'."
    );
}

/// The traits a vTPM (CRB model) with stateless UEFI firmware requires, as `release`.
fn vtpm_traits_as(release: crate::release::NovaSeries) -> BTreeSet<String> {
    let mut s = spec(2, &[]);
    s.image = Some(ImageMeta {
        properties: json!({"hw_tpm_version": "2.0", "hw_tpm_model": "tpm-crb",
                           "hw_firmware_type": "uefi", "hw_firmware_stateless": true})
        .as_object()
        .cloned()
        .unwrap_or_default(),
        ..ImageMeta::default()
    });
    let opts = QueryOptions {
        release,
        ..QueryOptions::default()
    };
    resources_from_request_spec(&mut s, &opts, true, None)
        .expect("request")
        .all_required_traits()
}

#[test]
fn nova_29_requires_the_vtpm_version_only_and_no_stateless_firmware() {
    use crate::release::NovaSeries;
    let old = vtpm_traits_as(NovaSeries::V2024_1);
    assert!(old.contains("COMPUTE_SECURITY_TPM_2_0"));
    assert!(!old.contains("COMPUTE_SECURITY_TPM_CRB"));
    assert!(!old.contains("COMPUTE_SECURITY_STATELESS_FIRMWARE"));
    let new = vtpm_traits_as(NovaSeries::V2024_2);
    for t in [
        "COMPUTE_SECURITY_TPM_2_0",
        "COMPUTE_SECURITY_TPM_CRB",
        "COMPUTE_SECURITY_STATELESS_FIRMWARE",
    ] {
        assert!(new.contains(t), "{t} in {new:?}");
    }
}
