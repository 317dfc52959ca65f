// SPDX-License-Identifier: Apache-2.0
//! Each release profile (`src/release.rs`) against the facts read from that release's
//! own code: `data/nova-releases/<series>.json`, written by `scripts/release_facts.sh`
//! from each nova release's source. A release that changes what its scheduler does
//! fails here until its profile says so.

use nova_scheduler::config::options::OPTIONS;
use nova_scheduler::filters::registry::filter_names;
use nova_scheduler::manager::request_filter::{
    self, OWNER_NOVA_MIN_COMPUTE_VERSION, REQUEST_FILTERS,
};
use nova_scheduler::model::selection::SELECTION_VERSION;
use nova_scheduler::notifications::payload::REQUEST_SPEC_PAYLOAD_VERSION;
use nova_scheduler::release::{
    Behaviour, NovaRelease, NovaSeries, DEPRECATED_FOR_REMOVAL, NOVA_RELEASES,
};
use nova_scheduler::state::discover::host_mapping_exists_warning;
use nova_scheduler::state::service_row::SERVICE_VERSION;
use nova_scheduler::weighers::registry::{in_release, ALL_WEIGHERS};
use serde_json::Value;
use std::path::PathBuf;

fn facts_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/nova-releases")
}

fn facts(release: &NovaRelease) -> Value {
    let path = facts_dir().join(format!("{}.json", release.name));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run scripts/release_facts.sh {}",
            path.display(),
            release.name
        )
    });
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().expect("a string").to_string())
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// A default from the facts as our option table writes it (`None`: an expression we
/// do not evaluate).
fn table_form(default: &Value) -> Option<String> {
    Some(match default {
        Value::Null => "<None>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().expect("f64");
            if f.fract() == 0.0 && f.abs() < 1e16 {
                format!("{f:.1}")
            } else {
                f.to_string()
            }
        }
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()?
            .join(","),
        Value::Object(_) => return None,
    })
}

#[test]
fn every_release_profile_matches_its_own_code() {
    for release in NOVA_RELEASES {
        let f = facts(release);
        let series = release.series;
        let has = |b: Behaviour| series.has(b);
        let name = release.name;
        assert_eq!(f["series"], name);
        assert_eq!(
            f["nova"], release.read_from,
            "{name}: facts of another nova"
        );
        assert_eq!(f["service_version"], release.service_version, "{name}");
        // The objects this daemon sends: a reply's Selections and the notifications'
        // payloads.
        let objects = &f["objects"];
        assert_eq!(objects["Selection"], SELECTION_VERSION, "{name}");
        assert_eq!(
            objects["RequestSpecPayload"], REQUEST_SPEC_PAYLOAD_VERSION,
            "{name}"
        );
        assert_eq!(
            objects["ImageMetaPropsPayload"], release.image_meta_props_payload,
            "{name}"
        );

        assert_eq!(
            f["tenant_isolation_keys"] == "prefix",
            has(Behaviour::TenantKeyPrefix),
            "{name}: AggregateMultiTenancyIsolation's keys"
        );
        assert_eq!(
            f["image_version_predicate"] == "versionutils",
            has(Behaviour::VersionutilsPredicate),
            "{name}: ImagePropertiesFilter's predicate"
        );
        assert_eq!(
            f["discover_hosts"]["leader_only"],
            has(Behaviour::DiscoverHostsLeaderOnly),
            "{name}: the periodic host discovery's leader"
        );
        assert_eq!(
            f["discover_hosts"]["host_mapping_exists_warning"],
            host_mapping_exists_warning(series),
            "{name}"
        );

        let ours: Vec<String> = filter_names().into_iter().map(String::from).collect();
        assert_eq!(
            sorted(ours),
            sorted(strings(&f["filters"])),
            "{name}: filters"
        );

        let weighers: Vec<String> = ALL_WEIGHERS
            .iter()
            .filter(|w| in_release(w, series))
            .map(|w| w.to_string())
            .collect();
        assert_eq!(
            sorted(weighers),
            sorted(strings(&f["weighers"])),
            "{name}: weighers"
        );

        let request_filters: Vec<String> = REQUEST_FILTERS
            .iter()
            .filter(|(n, _)| request_filter::in_release(n, series))
            .map(|(n, _)| n.to_string())
            .collect();
        assert_eq!(
            request_filters,
            strings(&f["request_filters"]),
            "{name}: request filters"
        );
        if has(Behaviour::OwnerNovaFilter) {
            assert_eq!(
                f["request_filter_min_compute_versions"]["MIN_COMPUTE_VERSION_OWNER_TRAIT"],
                OWNER_NOVA_MIN_COMPUTE_VERSION,
                "{name}"
            );
        }

        for (group, opts) in f["options"].as_object().expect("options") {
            for (option, spec) in opts.as_object().expect("group") {
                let ours = DEPRECATED_FOR_REMOVAL
                    .iter()
                    .find(|o| o.group == group && o.name == option)
                    .is_some_and(|o| has(o.since));
                assert_eq!(
                    spec["deprecated_for_removal"] == true,
                    ours,
                    "{name}: [{group}] {option} deprecated for removal"
                );
            }
        }

        let translations = strings(&f["resource_request_translations"]);
        let translates = |m: &str| translations.iter().any(|t| t == m);
        assert_eq!(
            translates("_translate_stateless_firmware_request"),
            has(Behaviour::StatelessFirmwareAndTpmModelTraits),
            "{name}: {translations:?}"
        );
        assert_eq!(
            translates("_translate_mem_encryption_request"),
            has(Behaviour::MemEncryptionModelTrait),
            "{name}: {translations:?}"
        );

        // Every option of the release's scheduler groups is read here with the
        // release's default, and ours that it lacks are the weigher's it lacks.
        let options = f["options"].as_object().expect("options");
        for (group, opts) in options {
            for (option, spec) in opts.as_object().expect("group") {
                let ours = OPTIONS
                    .iter()
                    .find(|o| o.group == group && o.name == option)
                    .unwrap_or_else(|| panic!("{name}: [{group}] {option} is not read"));
                if let Some(default) = table_form(&spec["default"]) {
                    assert_eq!(
                        ours.default, default,
                        "{name}: [{group}] {option}'s default"
                    );
                }
            }
        }
        for ours in OPTIONS.iter().filter(|o| options.contains_key(o.group)) {
            let in_release = options[ours.group].get(ours.name).is_some();
            let weigher_option = ours.name.starts_with("image_props_weight_");
            assert!(
                in_release || (weigher_option && !has(Behaviour::ImagePropertiesWeigher)),
                "{name}: [{}] {} is not an option of that release",
                ours.group,
                ours.name
            );
        }
    }
}

#[test]
fn every_facts_file_has_a_profile_and_the_newest_is_ours() {
    for entry in std::fs::read_dir(facts_dir()).expect("data/nova-releases") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            assert!(
                NovaSeries::parse(&stem).is_some(),
                "{} has no profile in src/release.rs",
                path.display()
            );
        }
    }
    assert_eq!(NovaSeries::NEWEST.service_version(), SERVICE_VERSION);
}
