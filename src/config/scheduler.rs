// SPDX-License-Identifier: Apache-2.0
//! `[scheduler]`, `[filter_scheduler]` and `[metrics]`, as nova/conf/scheduler.py has them.

use super::error::ConfigError;
use super::ini::RawConfig;
use super::reader::Reader;
pub use crate::filters::registry::DEFAULT_ENABLED_FILTERS;
use crate::model::fields::ARCHITECTURES;

/// `[scheduler]`.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedulerSection {
    /// Attempts to build an instance; the scheduler returns `max_attempts - 1` alternates.
    pub max_attempts: u32,
    /// `limit` of the Placement allocation-candidates query.
    pub max_placement_results: u32,
    /// Seconds between periodic cell host discoveries; -1 = never, 0 = every 60 s.
    pub discover_hosts_in_cells_interval: i64,
    /// nova: worker processes; here the threads of the one process's runtime (unset
    /// or 0: one per CPU, as nova).
    pub workers: Option<u32>,
    /// Prefilter: restrict projects to their Placement aggregates
    /// (`filter_tenant_id` aggregate metadata).
    pub limit_tenants_to_placement_aggregate: bool,
    /// With the above, projects without an aggregate may not build anywhere.
    pub placement_aggregate_required_for_tenants: bool,
    /// Prefilter: ask Placement for the image's disk format trait.
    pub query_placement_for_image_type_support: bool,
    /// Prefilter: exclude aggregates whose required traits the request lacks.
    pub enable_isolated_aggregate_filtering: bool,
    /// Prefilter: turn image properties into required traits.
    pub image_metadata_prefilter: bool,
    /// Prefilter: restrict to the aggregates of routed network segments.
    pub query_placement_for_routed_network_aggregates: bool,
}

impl SchedulerSection {
    pub(crate) fn read(raw: &RawConfig, errors: &mut Vec<ConfigError>) -> Self {
        let mut r = Reader::new(raw, "scheduler", errors);
        SchedulerSection {
            max_attempts: r.int("max_attempts", 3, Some(1), None),
            max_placement_results: r.int("max_placement_results", 1000, Some(1), None),
            discover_hosts_in_cells_interval: r.int(
                "discover_hosts_in_cells_interval",
                -1,
                Some(-1),
                None,
            ),
            workers: r.opt_int("workers", Some(0), None),
            limit_tenants_to_placement_aggregate: r
                .bool("limit_tenants_to_placement_aggregate", false),
            placement_aggregate_required_for_tenants: r
                .bool("placement_aggregate_required_for_tenants", false),
            query_placement_for_image_type_support: r
                .bool("query_placement_for_image_type_support", false),
            enable_isolated_aggregate_filtering: r
                .bool("enable_isolated_aggregate_filtering", false),
            image_metadata_prefilter: r.bool("image_metadata_prefilter", false),
            query_placement_for_routed_network_aggregates: r
                .bool("query_placement_for_routed_network_aggregates", false),
        }
    }
}

/// `[filter_scheduler]`.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterSchedulerSection {
    /// Pick randomly among the best N weighed hosts.
    pub host_subset_size: u32,
    /// IoOpsFilter: most concurrent I/O-heavy tasks (builds, resizes, ...) per host.
    pub max_io_ops_per_host: u32,
    /// NumInstancesFilter: most instances per host.
    pub max_instances_per_host: u32,
    /// Computes send instance info to the scheduler (affinity filters use it).
    pub track_instance_changes: bool,
    /// Filter classes that may be enabled (multi-valued; the default means "all").
    pub available_filters: Vec<String>,
    /// Filters to run, in order, by class name.
    pub enabled_filters: Vec<String>,
    /// Weigher classes to use (`nova.scheduler.weights.all_weighers` = all).
    pub weight_classes: Vec<String>,
    /// RAMWeigher multiplier (negative stacks, positive spreads).
    pub ram_weight_multiplier: f64,
    /// CPUWeigher multiplier.
    pub cpu_weight_multiplier: f64,
    /// DiskWeigher multiplier.
    pub disk_weight_multiplier: f64,
    /// HypervisorVersionWeigher multiplier.
    pub hypervisor_version_weight_multiplier: f64,
    /// NumInstancesWeigher multiplier.
    pub num_instances_weight_multiplier: f64,
    /// IoOpsWeigher multiplier (negative prefers idle hosts).
    pub io_ops_weight_multiplier: f64,
    /// ImagePropertiesWeigher multiplier.
    pub image_props_weight_multiplier: f64,
    /// ImagePropertiesWeigher `name=ratio` pairs.
    pub image_props_weight_setting: Vec<String>,
    /// PCIWeigher multiplier (≥ 0).
    pub pci_weight_multiplier: f64,
    /// ServerGroupSoftAffinityWeigher multiplier (≥ 0).
    pub soft_affinity_weight_multiplier: f64,
    /// ServerGroupSoftAntiAffinityWeigher multiplier (≥ 0).
    pub soft_anti_affinity_weight_multiplier: f64,
    /// BuildFailureWeigher multiplier.
    pub build_failure_weight_multiplier: f64,
    /// CrossCellWeigher multiplier.
    pub cross_cell_move_weight_multiplier: f64,
    /// Shuffle hosts of equal best weight.
    pub shuffle_best_same_weighed_hosts: bool,
    /// Architecture assumed for images without `hw_architecture` (one of
    /// [`ARCHITECTURES`](crate::model::fields::ARCHITECTURES)).
    pub image_properties_default_architecture: Option<String>,
    /// IsolatedHostsFilter: images that may only run on isolated hosts.
    pub isolated_images: Vec<String>,
    /// IsolatedHostsFilter: hosts that only run isolated images.
    pub isolated_hosts: Vec<String>,
    /// IsolatedHostsFilter: isolated hosts take only isolated images.
    pub restrict_isolated_hosts_to_isolated_images: bool,
    /// AggregateImagePropertiesIsolation: metadata key namespace (deprecated).
    pub aggregate_image_properties_isolation_namespace: Option<String>,
    /// AggregateImagePropertiesIsolation: namespace separator (deprecated).
    pub aggregate_image_properties_isolation_separator: String,
    /// PCI requests are tracked in Placement.
    pub pci_in_placement: bool,
}

impl FilterSchedulerSection {
    pub(crate) fn read(raw: &RawConfig, errors: &mut Vec<ConfigError>) -> Self {
        let mut r = Reader::new(raw, "filter_scheduler", errors);
        let positive = Some(0.0);
        FilterSchedulerSection {
            host_subset_size: r.int("host_subset_size", 1, Some(1), None),
            max_io_ops_per_host: r.int("max_io_ops_per_host", 8, Some(0), None),
            max_instances_per_host: r.int("max_instances_per_host", 50, Some(1), None),
            track_instance_changes: r.bool("track_instance_changes", true),
            available_filters: r
                .multi("available_filters", &["nova.scheduler.filters.all_filters"]),
            enabled_filters: r.list("enabled_filters", DEFAULT_ENABLED_FILTERS),
            weight_classes: r.list("weight_classes", &["nova.scheduler.weights.all_weighers"]),
            ram_weight_multiplier: r.float("ram_weight_multiplier", 1.0, None, None),
            cpu_weight_multiplier: r.float("cpu_weight_multiplier", 1.0, None, None),
            disk_weight_multiplier: r.float("disk_weight_multiplier", 1.0, None, None),
            hypervisor_version_weight_multiplier: r.float(
                "hypervisor_version_weight_multiplier",
                1.0,
                None,
                None,
            ),
            num_instances_weight_multiplier: r.float(
                "num_instances_weight_multiplier",
                0.0,
                None,
                None,
            ),
            io_ops_weight_multiplier: r.float("io_ops_weight_multiplier", -1.0, None, None),
            image_props_weight_multiplier: r.float(
                "image_props_weight_multiplier",
                0.0,
                None,
                None,
            ),
            image_props_weight_setting: r.list("image_props_weight_setting", &[]),
            pci_weight_multiplier: r.float("pci_weight_multiplier", 1.0, positive, None),
            soft_affinity_weight_multiplier: r.float(
                "soft_affinity_weight_multiplier",
                1.0,
                positive,
                None,
            ),
            soft_anti_affinity_weight_multiplier: r.float(
                "soft_anti_affinity_weight_multiplier",
                1.0,
                positive,
                None,
            ),
            build_failure_weight_multiplier: r.float(
                "build_failure_weight_multiplier",
                1e6,
                None,
                None,
            ),
            cross_cell_move_weight_multiplier: r.float(
                "cross_cell_move_weight_multiplier",
                1e6,
                None,
                None,
            ),
            shuffle_best_same_weighed_hosts: r.bool("shuffle_best_same_weighed_hosts", false),
            image_properties_default_architecture: r.opt_choice(
                "image_properties_default_architecture",
                ARCHITECTURES,
                false,
            ),
            isolated_images: r.list("isolated_images", &[]),
            isolated_hosts: r.list("isolated_hosts", &[]),
            restrict_isolated_hosts_to_isolated_images: r
                .bool("restrict_isolated_hosts_to_isolated_images", true),
            aggregate_image_properties_isolation_namespace: r
                .opt_string("aggregate_image_properties_isolation_namespace"),
            aggregate_image_properties_isolation_separator: r
                .string("aggregate_image_properties_isolation_separator", "."),
            pci_in_placement: r.bool("pci_in_placement", false),
        }
    }
}

/// `[metrics]` (MetricsWeigher).
#[derive(Clone, Debug, PartialEq)]
pub struct MetricsSection {
    /// MetricsWeigher multiplier.
    pub weight_multiplier: f64,
    /// `name=ratio` pairs of metrics to weigh.
    pub weight_setting: Vec<String>,
    /// A host missing a metric is an error (true) or gets `weight_of_unavailable` (false).
    pub required: bool,
    /// Weight of a host missing a metric when `required` is false.
    pub weight_of_unavailable: f64,
}

impl MetricsSection {
    pub(crate) fn read(raw: &RawConfig, errors: &mut Vec<ConfigError>) -> Self {
        let mut r = Reader::new(raw, "metrics", errors);
        MetricsSection {
            weight_multiplier: r.float("weight_multiplier", 1.0, None, None),
            weight_setting: r.list("weight_setting", &[]),
            required: r.bool("required", true),
            weight_of_unavailable: r.float("weight_of_unavailable", -10000.0, None, None),
        }
    }
}
