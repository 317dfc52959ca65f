// SPDX-License-Identifier: Apache-2.0
//! The filters we provide, keyed by nova's class name. `enabled_filters` entries may
//! also be dotted paths (`nova.scheduler.filters.compute_filter.ComputeFilter`): the
//! last component is the class name, as nova's loader resolves them.

use super::aggregate_image_properties_isolation::AggregateImagePropertiesIsolation;
use super::aggregate_instance_extra_specs_filter::AggregateInstanceExtraSpecsFilter;
use super::aggregate_io_ops_filter::AggregateIoOpsFilter;
use super::aggregate_multi_tenancy_isolation::AggregateMultiTenancyIsolation;
use super::aggregate_num_instances_filter::AggregateNumInstancesFilter;
use super::aggregate_type_affinity_filter::AggregateTypeAffinityFilter;
use super::all_hosts_filter::AllHostsFilter;
use super::compute_capabilities_filter::ComputeCapabilitiesFilter;
use super::compute_filter::ComputeFilter;
use super::different_host_filter::DifferentHostFilter;
use super::host_attrs::LockName;
use super::image_properties_filter::ImagePropertiesFilter;
use super::io_ops_filter::IoOpsFilter;
use super::isolated_hosts_filter::IsolatedHostsFilter;
use super::json_filter::JsonFilter;
use super::legacy::aggregate_core_filter::AggregateCoreFilter;
use super::legacy::aggregate_disk_filter::AggregateDiskFilter;
use super::legacy::aggregate_ram_filter::AggregateRamFilter;
use super::legacy::availability_zone_filter::AvailabilityZoneFilter;
use super::legacy::core_filter::CoreFilter;
use super::legacy::disk_filter::DiskFilter;
use super::legacy::group_affinity_filter::GroupAffinityFilter;
use super::legacy::group_anti_affinity_filter::GroupAntiAffinityFilter;
use super::legacy::ram_filter::RamFilter;
use super::legacy::retry_filter::RetryFilter;
use super::legacy::type_affinity_filter::TypeAffinityFilter;
use super::metrics_filter::MetricsFilter;
use super::num_instances_filter::NumInstancesFilter;
use super::numa_topology_filter::NUMATopologyFilter;
use super::pci_passthrough_filter::PciPassthroughFilter;
use super::same_host_filter::SameHostFilter;
use super::server_group_affinity_filter::ServerGroupAffinityFilter;
use super::server_group_anti_affinity_filter::ServerGroupAntiAffinityFilter;
use super::simple_cidr_affinity_filter::{Netaddr, SimpleCIDRAffinityFilter};
use super::{CustomFilters, FilterChain, HostFilter};
use crate::release::{Behaviour, NovaSeries};

/// The options filters read, captured once when the chain is built.
#[derive(Debug, Clone)]
pub struct FilterConfig {
    pub service_down_time: i64,
    pub report_interval: i64,
    /// `[filter_scheduler] max_instances_per_host` (50).
    pub max_instances_per_host: i64,
    /// `[filter_scheduler] max_io_ops_per_host` (8).
    pub max_io_ops_per_host: i64,
    /// `[filter_scheduler] isolated_images` ([]).
    pub isolated_images: Vec<String>,
    /// `[filter_scheduler] isolated_hosts` ([]).
    pub isolated_hosts: Vec<String>,
    /// `[filter_scheduler] restrict_isolated_hosts_to_isolated_images` (true).
    pub restrict_isolated_hosts_to_isolated_images: bool,
    /// `[filter_scheduler] image_properties_default_architecture` (None).
    pub image_properties_default_architecture: Option<String>,
    /// `[filter_scheduler] aggregate_image_properties_isolation_namespace` (None).
    pub aggregate_image_properties_isolation_namespace: Option<String>,
    /// `[filter_scheduler] aggregate_image_properties_isolation_separator` (".").
    pub aggregate_image_properties_isolation_separator: String,
    /// `[metrics] weight_setting` ([]), read by MetricsFilter.
    pub metrics_weight_setting: Vec<String>,
    /// `[DEFAULT] default_availability_zone` ("nova"), read by the legacy
    /// AvailabilityZoneFilter.
    pub default_availability_zone: String,
    /// `[compute] packing_host_numa_cells_allocation_strategy` (false), read by
    /// NUMATopologyFilter.
    pub packing_host_numa_cells_allocation_strategy: bool,
    /// The nova release whose filters these are.
    pub release: NovaSeries,
}

impl Default for FilterConfig {
    fn default() -> Self {
        FilterConfig {
            service_down_time: 60,
            report_interval: 10,
            max_instances_per_host: 50,
            max_io_ops_per_host: 8,
            isolated_images: Vec::new(),
            isolated_hosts: Vec::new(),
            restrict_isolated_hosts_to_isolated_images: true,
            image_properties_default_architecture: None,
            aggregate_image_properties_isolation_namespace: None,
            aggregate_image_properties_isolation_separator: ".".to_string(),
            metrics_weight_setting: Vec::new(),
            default_availability_zone: "nova".to_string(),
            packing_host_numa_cells_allocation_strategy: false,
            release: NovaSeries::NEWEST,
        }
    }
}

type Factory = fn(&FilterConfig) -> Box<dyn HostFilter>;

/// nova's default `[filter_scheduler] enabled_filters`.
pub const DEFAULT_ENABLED_FILTERS: &[&str] = &[
    "ComputeFilter",
    "ComputeCapabilitiesFilter",
    "ImagePropertiesFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
];

/// Sorted by name; one line per filter.
const REGISTRY: &[(&str, Factory)] = &[
    (AggregateImagePropertiesIsolation::NAME, |c| {
        Box::new(AggregateImagePropertiesIsolation::new(
            c.aggregate_image_properties_isolation_namespace.clone(),
            c.aggregate_image_properties_isolation_separator.clone(),
        ))
    }),
    (AggregateInstanceExtraSpecsFilter::NAME, |_| {
        Box::new(AggregateInstanceExtraSpecsFilter)
    }),
    (AggregateIoOpsFilter::NAME, |c| {
        Box::new(AggregateIoOpsFilter {
            max_io_ops_per_host: c.max_io_ops_per_host,
        })
    }),
    (AggregateMultiTenancyIsolation::NAME, |c| {
        Box::new(AggregateMultiTenancyIsolation {
            tenant_key_prefix: c.release.has(Behaviour::TenantKeyPrefix),
        })
    }),
    (AggregateNumInstancesFilter::NAME, |c| {
        Box::new(AggregateNumInstancesFilter {
            max_instances_per_host: c.max_instances_per_host,
        })
    }),
    (AggregateTypeAffinityFilter::NAME, |_| {
        Box::new(AggregateTypeAffinityFilter)
    }),
    (AllHostsFilter::NAME, |_| Box::new(AllHostsFilter)),
    (ComputeCapabilitiesFilter::NAME, |c| {
        Box::new(ComputeCapabilitiesFilter {
            lock_name: LockName::of(c.release),
        })
    }),
    (ComputeFilter::NAME, |c| {
        Box::new(ComputeFilter {
            service_down_time: c.service_down_time,
            report_interval: c.report_interval,
        })
    }),
    (DifferentHostFilter::NAME, |_| Box::new(DifferentHostFilter)),
    (ImagePropertiesFilter::NAME, |c| {
        Box::new(ImagePropertiesFilter {
            default_architecture: c.image_properties_default_architecture.clone(),
            distutils_predicate: !c.release.has(Behaviour::VersionutilsPredicate),
        })
    }),
    (IoOpsFilter::NAME, |c| {
        Box::new(IoOpsFilter {
            max_io_ops_per_host: c.max_io_ops_per_host,
        })
    }),
    (IsolatedHostsFilter::NAME, |c| {
        Box::new(IsolatedHostsFilter {
            isolated_images: c.isolated_images.clone(),
            isolated_hosts: c.isolated_hosts.clone(),
            restrict_isolated_hosts_to_isolated_images: c
                .restrict_isolated_hosts_to_isolated_images,
        })
    }),
    (JsonFilter::NAME, |c| {
        Box::new(JsonFilter::with_lock_name(LockName::of(c.release)))
    }),
    (MetricsFilter::NAME, |c| {
        Box::new(MetricsFilter::new(&c.metrics_weight_setting))
    }),
    (NUMATopologyFilter::NAME, |c| {
        Box::new(NUMATopologyFilter::new(
            c.packing_host_numa_cells_allocation_strategy,
        ))
    }),
    (NumInstancesFilter::NAME, |c| {
        Box::new(NumInstancesFilter {
            max_instances_per_host: c.max_instances_per_host,
        })
    }),
    (PciPassthroughFilter::NAME, |_| {
        Box::new(PciPassthroughFilter)
    }),
    (SameHostFilter::NAME, |_| Box::new(SameHostFilter)),
    (ServerGroupAffinityFilter::NAME, |_| {
        Box::new(ServerGroupAffinityFilter)
    }),
    (ServerGroupAntiAffinityFilter::NAME, |_| {
        Box::new(ServerGroupAntiAffinityFilter)
    }),
    (SimpleCIDRAffinityFilter::NAME, |c| {
        Box::new(SimpleCIDRAffinityFilter {
            netaddr: if c.release.has(Behaviour::Netaddr1) {
                Netaddr::V1
            } else {
                Netaddr::V0_10
            },
        })
    }),
];

/// Filters nova removed (see `super::legacy`), never enabled by default; found by
/// class name or by their old dotted path.
const LEGACY: &[(&str, &str, Factory)] = &[
    (AggregateCoreFilter::NAME, AggregateCoreFilter::PATH, |_| {
        Box::new(AggregateCoreFilter)
    }),
    (AggregateDiskFilter::NAME, AggregateDiskFilter::PATH, |_| {
        Box::new(AggregateDiskFilter)
    }),
    (AggregateRamFilter::NAME, AggregateRamFilter::PATH, |_| {
        Box::new(AggregateRamFilter)
    }),
    (
        AvailabilityZoneFilter::NAME,
        AvailabilityZoneFilter::PATH,
        |c| {
            Box::new(AvailabilityZoneFilter {
                default_availability_zone: c.default_availability_zone.clone(),
            })
        },
    ),
    (CoreFilter::NAME, CoreFilter::PATH, |_| Box::new(CoreFilter)),
    (DiskFilter::NAME, DiskFilter::PATH, |_| Box::new(DiskFilter)),
    (GroupAffinityFilter::NAME, GroupAffinityFilter::PATH, |_| {
        Box::new(GroupAffinityFilter)
    }),
    (
        GroupAntiAffinityFilter::NAME,
        GroupAntiAffinityFilter::PATH,
        |_| Box::new(GroupAntiAffinityFilter),
    ),
    (RamFilter::NAME, RamFilter::PATH, |_| Box::new(RamFilter)),
    (RetryFilter::NAME, RetryFilter::PATH, |_| {
        Box::new(RetryFilter)
    }),
    (TypeAffinityFilter::NAME, TypeAffinityFilter::PATH, |_| {
        TypeAffinityFilter::warn_deprecated();
        Box::new(TypeAffinityFilter)
    }),
];

/// Removed nova filters this daemon cannot offer, with the reason startup gives.
const UNAVAILABLE: &[(&str, &str)] = &[
    (
        "TrustedFilter",
        "TrustedFilter (removed in nova 17.0.0 Queens) asked an OpenAttestation server for each host's trust level; that service and its API are gone, so no decision can be made",
    ),
];

/// nova's filters that this daemon does not provide yet. Naming one in
/// `enabled_filters` stops startup with this explanation instead of silently
/// deciding differently from nova.
const NOT_YET: &[&str] = &[];

/// Every `enabled_filters` entry that could not be resolved, reported at once.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", describe(.unknown, .not_implemented, .unavailable, .failed))]
pub struct UnknownFilters {
    /// Names nova itself would reject (`SchedulerHostFilterNotFound`).
    pub unknown: Vec<String>,
    /// nova filters this daemon does not implement yet.
    pub not_implemented: Vec<String>,
    /// Removed nova filters that cannot be offered, each with the reason.
    pub unavailable: Vec<String>,
    /// An operator's classes that could not be instantiated, each with the reason.
    pub failed: Vec<String>,
}

fn describe(
    unknown: &[String],
    not_implemented: &[String],
    unavailable: &[String],
    failed: &[String],
) -> String {
    let mut parts = Vec::new();
    if !unknown.is_empty() {
        parts.push(format!(
            "Scheduler Host Filter(s) could not be found: {}",
            unknown.join(", ")
        ));
    }
    if !not_implemented.is_empty() {
        parts.push(format!(
            "nova filter(s) not implemented by this scheduler yet: {} (remove them from [filter_scheduler] enabled_filters or keep nova-scheduler)",
            not_implemented.join(", ")
        ));
    }
    parts.extend(unavailable.iter().cloned());
    parts.extend(failed.iter().cloned());
    parts.join("; ")
}

/// The class name of an `enabled_filters` entry (last dotted component).
fn class_name(entry: &str) -> &str {
    entry.trim().rsplit('.').next().unwrap_or(entry)
}

/// The class names of nova's current filters, as `all_filters` loads them (the
/// filters nova removed, in `legacy`, are not among them).
pub fn filter_names() -> Vec<&'static str> {
    REGISTRY.iter().map(|(n, _)| *n).collect()
}

/// Builds the chain in `enabled_filters` order; a name listed twice runs twice, as in nova.
pub fn build_chain(
    enabled: &[String],
    config: &FilterConfig,
) -> Result<FilterChain, UnknownFilters> {
    build_chain_with(enabled, config, None)
}

/// [`build_chain`] with an operator's classes beside nova's; one of theirs that
/// takes a nova filter's name is the one enabled (nova keeps the last class of a
/// name, and theirs are listed after nova's).
pub fn build_chain_with(
    enabled: &[String],
    config: &FilterConfig,
    custom: Option<&dyn CustomFilters>,
) -> Result<FilterChain, UnknownFilters> {
    let mut filters = Vec::new();
    let mut errors = UnknownFilters {
        unknown: Vec::new(),
        not_implemented: Vec::new(),
        unavailable: Vec::new(),
        failed: Vec::new(),
    };
    for entry in enabled {
        if let Some(built) = custom.and_then(|c| c.build(entry.trim())) {
            match built {
                Ok(filter) => filters.push(filter),
                Err(why) => errors.failed.push(why),
            }
            continue;
        }
        let name = class_name(entry);
        let legacy = LEGACY
            .iter()
            .find(|(n, path, _)| *n == name && (!entry.contains('.') || *path == entry.trim()));
        let unavailable = UNAVAILABLE.iter().find(|(n, _)| *n == name);
        match REGISTRY.iter().find(|(n, _)| *n == name) {
            Some((_, factory)) => filters.push(factory(config)),
            None if legacy.is_some() => filters.push(legacy.map_or_else(
                || unreachable!("checked above"),
                |(_, _, factory)| factory(config),
            )),
            None if unavailable.is_some() => errors
                .unavailable
                .extend(unavailable.map(|(_, why)| why.to_string())),
            None if NOT_YET.contains(&name) => errors.not_implemented.push(name.to_string()),
            None => errors.unknown.push(entry.trim().to_string()),
        }
    }
    if errors.unknown.is_empty()
        && errors.not_implemented.is_empty()
        && errors.unavailable.is_empty()
        && errors.failed.is_empty()
    {
        Ok(FilterChain::new(filters))
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_sorted_without_duplicates() {
        let names: Vec<_> = REGISTRY.iter().map(|(n, _)| *n).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names, sorted);
        for n in &names {
            assert!(
                !NOT_YET.contains(n),
                "{n} is both implemented and listed as not yet"
            );
        }
    }

    #[test]
    fn dotted_paths_and_order() {
        let chain = build_chain(
            &[
                "nova.scheduler.filters.compute_filter.ComputeFilter".into(),
                "AllHostsFilter".into(),
            ],
            &FilterConfig::default(),
        )
        .expect("chain");
        assert_eq!(chain.names(), vec!["ComputeFilter", "AllHostsFilter"]);
    }

    #[test]
    fn legacy_filters_by_name_and_old_path_and_never_by_default() {
        let chain = build_chain(
            &[
                "nova.scheduler.filters.ram_filter.RamFilter".into(),
                "nova.scheduler.filters.core_filter.CoreFilter".into(),
                "nova.scheduler.filters.core_filter.AggregateCoreFilter".into(),
                "DiskFilter".into(),
                "RetryFilter".into(),
                "nova.scheduler.filters.availability_zone_filter.AvailabilityZoneFilter".into(),
                "GroupAntiAffinityFilter".into(),
                "nova.scheduler.filters.type_filter.TypeAffinityFilter".into(),
                "TypeAffinityFilter".into(),
            ],
            &FilterConfig::default(),
        )
        .expect("legacy chain");
        assert_eq!(
            chain.names(),
            vec![
                "RamFilter",
                "CoreFilter",
                "AggregateCoreFilter",
                "DiskFilter",
                "RetryFilter",
                "AvailabilityZoneFilter",
                "GroupAntiAffinityFilter",
                "TypeAffinityFilter",
                "TypeAffinityFilter"
            ]
        );
        // A dotted path must be the old one (the class lived in core_filter, not ram_filter).
        let err = build_chain(
            &["nova.scheduler.filters.ram_filter.CoreFilter".into()],
            &FilterConfig::default(),
        )
        .expect_err("wrong module");
        assert_eq!(
            err.unknown,
            vec!["nova.scheduler.filters.ram_filter.CoreFilter"]
        );
        for (name, _, _) in LEGACY {
            assert!(
                !DEFAULT_ENABLED_FILTERS.contains(name),
                "{name} is on by default"
            );
        }
        let err = build_chain(&["TrustedFilter".into()], &FilterConfig::default())
            .expect_err("unavailable");
        assert_eq!(err.unavailable.len(), 1);
        assert!(err.to_string().contains("OpenAttestation"));
    }

    #[test]
    fn every_bad_name_reported_at_once() {
        let err = build_chain(
            &["NopeFilter".into(), "TrustedFilter".into(), "Other".into()],
            &FilterConfig::default(),
        )
        .expect_err("unknown");
        assert_eq!(err.unknown, vec!["NopeFilter", "Other"]);
        assert_eq!(err.unavailable.len(), 1);
        assert!(err.to_string().contains("NopeFilter, Other"));
    }
}
