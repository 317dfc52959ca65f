// SPDX-License-Identifier: Apache-2.0
//! nova's `get_filtered_objects`: run the enabled filters in order over the
//! candidate hosts, stop when one leaves nothing, and keep a per-filter history.

use super::{FilterRequest, HostFilter};
use crate::model::host_state::positions_in_memory_order;
use crate::model::HostState;
use tracing::{debug, info};

/// One step of the history: `"<Filter>: (start: S, end: E)"` in nova's log.
#[derive(Debug, Clone, PartialEq)]
pub struct FilterStep {
    pub filter: &'static str,
    pub start: usize,
    pub end: usize,
}

/// The enabled filters, in `enabled_filters` order.
pub struct FilterChain {
    filters: Vec<Box<dyn HostFilter>>,
}

impl std::fmt::Debug for FilterChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl FilterChain {
    pub fn new(filters: Vec<Box<dyn HostFilter>>) -> Self {
        FilterChain { filters }
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.filters.iter().map(|f| f.name()).collect()
    }

    /// Filters `candidates` (indices into `hosts`), keeping their order. Returns the
    /// survivors and the history of the filters that ran.
    pub fn run(
        &self,
        hosts: &[HostState],
        candidates: &[usize],
        req: &FilterRequest<'_>,
    ) -> (Vec<usize>, Vec<FilterStep>) {
        self.run_with(candidates, req, |filter, i| {
            filter.host_passes(&hosts[i], req)
        })
    }

    /// As [`run`](Self::run), letting the filters write to the hosts as nova's do
    /// (pruned allocation candidates, limits); the scheduler runs this one.
    pub fn run_mut(
        &self,
        hosts: &mut [HostState],
        candidates: &[usize],
        req: &FilterRequest<'_>,
    ) -> (Vec<usize>, Vec<FilterStep>) {
        self.run_with(candidates, req, |filter, i| {
            filter.filter_host(&mut hosts[i], req)
        })
    }

    fn run_with(
        &self,
        candidates: &[usize],
        req: &FilterRequest<'_>,
        mut passes: impl FnMut(&dyn HostFilter, usize) -> bool,
    ) -> (Vec<usize>, Vec<FilterStep>) {
        let mut current = candidates.to_vec();
        let mut history = Vec::new();
        debug!(
            hosts = current.len(),
            "Starting with {} host(s)",
            current.len()
        );
        for filter in &self.filters {
            if filter.once_per_request() && req.index > 0 {
                continue;
            }
            let start = current.len();
            if !(req.is_rebuild && !filter.run_on_rebuild()) {
                // Hosts are visited in memory order; the survivors keep their order.
                let mut keep = vec![false; current.len()];
                for p in positions_in_memory_order(&current) {
                    keep[p] = passes(filter.as_ref(), current[p]);
                }
                let mut kept = keep.into_iter();
                current.retain(|_| kept.next().unwrap_or(false));
            }
            history.push(FilterStep {
                filter: filter.name(),
                start,
                end: current.len(),
            });
            if current.is_empty() {
                info!(
                    filter = filter.name(),
                    "Filter {} returned 0 hosts",
                    filter.name()
                );
                break;
            }
            debug!(
                filter = filter.name(),
                hosts = current.len(),
                "Filter {} returned {} host(s)",
                filter.name(),
                current.len()
            );
        }
        if current.is_empty() {
            let parts: Vec<String> = history
                .iter()
                .map(|s| format!("'{}: (start: {}, end: {})'", s.filter, s.start, s.end))
                .collect();
            info!(
                "Filtering removed all hosts for the request with instance ID '{}'. Filter results: [{}]",
                req.spec.instance_uuid.as_deref().unwrap_or("None"),
                parts.join(", ")
            );
        }
        (current, history)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RequestSpec;
    use chrono::Utc;

    struct NameIs(&'static str, &'static str, bool);
    impl HostFilter for NameIs {
        fn name(&self) -> &'static str {
            self.0
        }
        fn host_passes(&self, host: &HostState, _req: &FilterRequest<'_>) -> bool {
            host.host != self.1
        }
        fn once_per_request(&self) -> bool {
            self.2
        }
    }

    fn hosts() -> Vec<HostState> {
        ["a", "b", "c"]
            .iter()
            .map(|h| HostState {
                host: h.to_string(),
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn order_history_and_stop_on_empty() {
        let chain = FilterChain::new(vec![
            Box::new(NameIs("FilterA", "b", false)),
            Box::new(NameIs("FilterB", "z", false)),
        ]);
        let spec = RequestSpec::default();
        let req = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        let (kept, history) = chain.run(&mut hosts(), &[0, 1, 2], &req);
        assert_eq!(kept, vec![0, 2]);
        assert_eq!(
            history,
            vec![
                FilterStep {
                    filter: "FilterA",
                    start: 3,
                    end: 2
                },
                FilterStep {
                    filter: "FilterB",
                    start: 2,
                    end: 2
                },
            ]
        );
        let rejecting = FilterChain::new(vec![
            Box::new(NameIs("Drop", "a", false)),
            Box::new(NameIs("DropAll", "c", false)),
            Box::new(NameIs("Never", "x", false)),
        ]);
        let (kept, history) = rejecting.run(&mut hosts(), &[0, 2], &req);
        assert!(kept.is_empty());
        assert_eq!(history.len(), 2, "filters after an empty result do not run");
    }

    #[test]
    fn once_per_request_skipped_after_first_instance_and_rebuild_passes() {
        let chain = FilterChain::new(vec![Box::new(NameIs("Once", "a", true))]);
        let spec = RequestSpec::default();
        let second = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 1,
            is_rebuild: false,
        };
        assert_eq!(chain.run(&mut hosts(), &[0, 1], &second).0, vec![0, 1]);
        let rebuild = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: true,
        };
        let (kept, history) = chain.run(&mut hosts(), &[0, 1], &rebuild);
        assert_eq!(
            kept,
            vec![0, 1],
            "a filter without RUN_ON_REBUILD passes every host on rebuild"
        );
        assert_eq!(history.len(), 1);
    }
}
