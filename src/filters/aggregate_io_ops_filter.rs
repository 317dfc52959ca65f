// SPDX-License-Identifier: Apache-2.0
//! `AggregateIoOpsFilter`: `IoOpsFilter` with the limit taken from the host's
//! aggregates' `max_io_ops_per_host` metadata (the minimum wins; one value that is
//! not an integer, or none at all, means the configured limit).

use super::io_ops_filter::io_ops_passes;
use super::utils::{aggregate_values_from_key, validate_num_values_or_default, BasedOn};
use super::{FilterRequest, HostFilter};
use crate::model::HostState;
use crate::py;

pub struct AggregateIoOpsFilter {
    /// `[filter_scheduler] max_io_ops_per_host` (8), the fallback.
    pub max_io_ops_per_host: i64,
}

impl AggregateIoOpsFilter {
    pub const NAME: &'static str = "AggregateIoOpsFilter";

    fn max_io_ops(&self, host: &HostState) -> i64 {
        let values = aggregate_values_from_key(host, "max_io_ops_per_host");
        validate_num_values_or_default(
            &values,
            self.max_io_ops_per_host,
            py::int::int_saturating,
            BasedOn::Min,
            "max_io_ops_per_host",
        )
    }
}

impl HostFilter for AggregateIoOpsFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, _req: &FilterRequest<'_>) -> bool {
        io_ops_passes(host, self.max_io_ops(host), Self::NAME)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Aggregate, RequestSpec};
    use chrono::Utc;
    use std::sync::Arc;

    fn passes(config: i64, values: &[&str], io_ops: i64) -> bool {
        let spec = RequestSpec::default();
        let req = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        let host = HostState {
            host: "host1".into(),
            num_io_ops: io_ops,
            aggregates: values
                .iter()
                .map(|v| {
                    Arc::new(Aggregate {
                        metadata: [("max_io_ops_per_host".to_string(), v.to_string())].into(),
                        ..Default::default()
                    })
                })
                .collect(),
            ..Default::default()
        };
        AggregateIoOpsFilter {
            max_io_ops_per_host: config,
        }
        .host_passes(&host, &req)
    }

    /// nova's test_io_ops_filters (aggregate part).
    #[test]
    fn nova_vectors() {
        assert!(!passes(7, &[], 7));
        assert!(passes(7, &["8"], 7));
        assert!(passes(8, &["XXX"], 7));
        assert!(!passes(9, &["8", "7"], 7));
        assert!(
            passes(8, &["1", "1.5"], 7),
            "int('1.5') raises: config value"
        );
        let f = AggregateIoOpsFilter {
            max_io_ops_per_host: 8,
        };
        assert!(!f.once_per_request());
        assert!(!f.run_on_rebuild());
    }
}
