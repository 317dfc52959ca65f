// SPDX-License-Identifier: Apache-2.0
//! `AggregateNumInstancesFilter`: `NumInstancesFilter` with the limit taken from the
//! host's aggregates' `max_instances_per_host` metadata (the minimum wins; one value
//! that is not an integer, or none at all, means the configured limit).

use super::num_instances_filter::num_instances_passes;
use super::utils::{aggregate_values_from_key, validate_num_values_or_default, BasedOn};
use super::{FilterRequest, HostFilter};
use crate::model::HostState;
use crate::py;

pub struct AggregateNumInstancesFilter {
    /// `[filter_scheduler] max_instances_per_host` (50), the fallback.
    pub max_instances_per_host: i64,
}

impl AggregateNumInstancesFilter {
    pub const NAME: &'static str = "AggregateNumInstancesFilter";

    fn max_instances(&self, host: &HostState) -> i64 {
        let values = aggregate_values_from_key(host, "max_instances_per_host");
        validate_num_values_or_default(
            &values,
            self.max_instances_per_host,
            py::int::int_saturating,
            BasedOn::Min,
            "max_instances_per_host",
        )
    }
}

impl HostFilter for AggregateNumInstancesFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, _req: &FilterRequest<'_>) -> bool {
        num_instances_passes(host, self.max_instances(host), Self::NAME)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Aggregate, RequestSpec};
    use chrono::Utc;
    use std::sync::Arc;

    fn host_with(key: &str, values: &[&str], field: fn(&mut HostState, i64), n: i64) -> HostState {
        let mut host = HostState {
            host: "host1".into(),
            aggregates: values
                .iter()
                .map(|v| {
                    Arc::new(Aggregate {
                        metadata: [(key.to_string(), v.to_string())].into(),
                        ..Default::default()
                    })
                })
                .collect(),
            ..Default::default()
        };
        field(&mut host, n);
        host
    }

    fn passes(config: i64, values: &[&str], num_instances: i64) -> bool {
        let spec = RequestSpec::default();
        let req = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        let host = host_with(
            "max_instances_per_host",
            values,
            |h, n| h.num_instances = n,
            num_instances,
        );
        AggregateNumInstancesFilter {
            max_instances_per_host: config,
        }
        .host_passes(&host, &req)
    }

    /// nova's test_num_instances_filters (aggregate part).
    #[test]
    fn nova_vectors() {
        assert!(!passes(4, &[], 5));
        assert!(passes(4, &["6"], 5));
        assert!(passes(6, &["XXX"], 0));
        // The minimum over aggregates wins; one bad value reverts all to the config.
        assert!(!passes(10, &["6", "5"], 5));
        assert!(passes(6, &["2", "XXX"], 5));
        assert!(passes(4, &[" 6 "], 5));
        let f = AggregateNumInstancesFilter {
            max_instances_per_host: 50,
        };
        assert!(!f.once_per_request());
        assert!(!f.run_on_rebuild());
    }
}
