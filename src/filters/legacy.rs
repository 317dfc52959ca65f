// SPDX-License-Identifier: Apache-2.0
//! Filters nova has REMOVED, kept for operators whose `enabled_filters` still name
//! them. None is in nova's default `enabled_filters`; each behaves as the last nova
//! release that shipped it did (release named in each file). They resolve by class
//! name and by their old dotted path (`nova.scheduler.filters.ram_filter.RamFilter`).
//!
//! `TrustedFilter` (removed in Queens) asked an OpenAttestation service that no
//! longer exists: naming it stops startup with the reason instead of deciding
//! differently from nova.

pub mod aggregate_core_filter;
pub mod aggregate_disk_filter;
pub mod aggregate_ram_filter;
pub mod availability_zone_filter;
pub mod core_filter;
pub mod disk_filter;
pub mod group_affinity_filter;
pub mod group_anti_affinity_filter;
pub mod ram_filter;
pub mod retry_filter;
pub mod type_affinity_filter;

use super::utils::{aggregate_values_from_key, validate_num_values_or_default, BasedOn};
use crate::model::HostState;
use crate::py;

/// `AggregateCore/Ram/DiskFilter`'s ratio: the minimum float of the host's aggregates'
/// `key` metadata; none, or one value that is not a float, means the host's ratio.
pub(crate) fn aggregate_ratio(host: &HostState, key: &str, host_ratio: f64) -> f64 {
    let values = aggregate_values_from_key(host, key);
    validate_num_values_or_default(&values, host_ratio, py::float::float, BasedOn::Min, key)
}

#[cfg(test)]
pub(crate) mod test_support {
    use crate::filters::FilterRequest;
    use crate::model::{Aggregate, HostState, RequestSpec};
    use chrono::Utc;
    use std::sync::Arc;

    pub fn req(spec: &RequestSpec) -> FilterRequest<'_> {
        FilterRequest {
            spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        }
    }

    pub fn with_aggregate_metadata(mut host: HostState, key: &str, values: &[&str]) -> HostState {
        for (i, v) in values.iter().enumerate() {
            host.aggregates.push(Arc::new(Aggregate {
                id: i as i64,
                name: format!("agg{i}"),
                hosts: [host.host.to_string()].into(),
                metadata: [(key.to_string(), v.to_string())].into(),
                ..Default::default()
            }));
        }
        host
    }
}
