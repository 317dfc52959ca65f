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
use super::image_properties_filter::ImagePropertiesFilter;
use super::io_ops_filter::IoOpsFilter;
use super::isolated_hosts_filter::IsolatedHostsFilter;
use super::json_filter::JsonFilter;
use super::metrics_filter::MetricsFilter;
use super::num_instances_filter::NumInstancesFilter;
use super::numa_topology_filter::NUMATopologyFilter;
use super::same_host_filter::SameHostFilter;
use super::server_group_affinity_filter::ServerGroupAffinityFilter;
use super::server_group_anti_affinity_filter::ServerGroupAntiAffinityFilter;
use super::simple_cidr_affinity_filter::SimpleCIDRAffinityFilter;
use super::{FilterChain, HostFilter};

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
    /// `[compute] packing_host_numa_cells_allocation_strategy` (false), read by
    /// NUMATopologyFilter.
    pub packing_host_numa_cells_allocation_strategy: bool,
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
            packing_host_numa_cells_allocation_strategy: false,
        }
    }
}

type Factory = fn(&FilterConfig) -> Box<dyn HostFilter>;

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
    (AggregateMultiTenancyIsolation::NAME, |_| {
        Box::new(AggregateMultiTenancyIsolation)
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
    (ComputeCapabilitiesFilter::NAME, |_| {
        Box::new(ComputeCapabilitiesFilter)
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
    (JsonFilter::NAME, |_| Box::new(JsonFilter::new())),
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
    (SameHostFilter::NAME, |_| Box::new(SameHostFilter)),
    (ServerGroupAffinityFilter::NAME, |_| {
        Box::new(ServerGroupAffinityFilter)
    }),
    (ServerGroupAntiAffinityFilter::NAME, |_| {
        Box::new(ServerGroupAntiAffinityFilter)
    }),
    (SimpleCIDRAffinityFilter::NAME, |_| {
        Box::new(SimpleCIDRAffinityFilter)
    }),
];

/// nova's filters that this daemon does not provide yet. Naming one in
/// `enabled_filters` stops startup with this explanation instead of silently
/// deciding differently from nova.
const NOT_YET: &[&str] = &["PciPassthroughFilter"];

/// Every `enabled_filters` entry that could not be resolved, reported at once.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", describe(.unknown, .not_implemented))]
pub struct UnknownFilters {
    /// Names nova itself would reject (`SchedulerHostFilterNotFound`).
    pub unknown: Vec<String>,
    /// nova filters this daemon does not implement yet.
    pub not_implemented: Vec<String>,
}

fn describe(unknown: &[String], not_implemented: &[String]) -> String {
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
    parts.join("; ")
}

/// The class name of an `enabled_filters` entry (last dotted component).
fn class_name(entry: &str) -> &str {
    entry.trim().rsplit('.').next().unwrap_or(entry)
}

/// Builds the chain in `enabled_filters` order; a name listed twice runs twice, as in nova.
pub fn build_chain(
    enabled: &[String],
    config: &FilterConfig,
) -> Result<FilterChain, UnknownFilters> {
    let mut filters = Vec::new();
    let mut errors = UnknownFilters {
        unknown: Vec::new(),
        not_implemented: Vec::new(),
    };
    for entry in enabled {
        let name = class_name(entry);
        match REGISTRY.iter().find(|(n, _)| *n == name) {
            Some((_, factory)) => filters.push(factory(config)),
            None if NOT_YET.contains(&name) => errors.not_implemented.push(name.to_string()),
            None => errors.unknown.push(entry.trim().to_string()),
        }
    }
    if errors.unknown.is_empty() && errors.not_implemented.is_empty() {
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
    fn every_bad_name_reported_at_once() {
        let err = build_chain(
            &[
                "NopeFilter".into(),
                "PciPassthroughFilter".into(),
                "Other".into(),
            ],
            &FilterConfig::default(),
        )
        .expect_err("unknown");
        assert_eq!(err.unknown, vec!["NopeFilter", "Other"]);
        assert_eq!(err.not_implemented, vec!["PciPassthroughFilter"]);
        assert!(err.to_string().contains("NopeFilter, Other"));
    }
}
