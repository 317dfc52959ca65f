// SPDX-License-Identifier: Apache-2.0
//! nova's `get_filtered_objects`: run the enabled filters in order over the
//! candidate hosts, stop when one leaves nothing, and keep a per-filter history.

use super::{FilterRequest, HostFilter};
use crate::model::host_state::positions_in_memory_order;
use crate::model::HostState;
use crate::py;
use crate::py::str::PyStr;
use tracing::{debug, info, Level};

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
    /// Told each filter's hosts in and out as it runs (the daemon's metrics).
    on_filtered: Option<OnFiltered>,
}

/// A filter's name, the hosts it was given and the hosts it kept.
pub type OnFiltered = fn(&'static str, usize, usize);

impl std::fmt::Debug for FilterChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl FilterChain {
    /// The chain, telling `on_filtered` what each filter kept.
    pub fn on_filtered(mut self, on_filtered: OnFiltered) -> Self {
        self.on_filtered = Some(on_filtered);
        self
    }

    pub fn new(filters: Vec<Box<dyn HostFilter>>) -> Self {
        FilterChain {
            filters,
            on_filtered: None,
        }
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.filters.iter().map(|f| f.name()).collect()
    }

    /// The filters, in `enabled_filters` order.
    pub(crate) fn filters(&self) -> &[Box<dyn HostFilter>] {
        &self.filters
    }

    /// Filters `candidates` (indices into `hosts`), keeping their order. Returns the
    /// survivors and the history of the filters that ran.
    pub fn run(
        &self,
        hosts: &[HostState],
        candidates: &[usize],
        req: &FilterRequest<'_>,
    ) -> (Vec<usize>, Vec<FilterStep>) {
        let (kept, history, full) = self.run_with(
            candidates,
            req,
            |filter, i| filter.host_passes(&hosts[i], req),
            |filter, current| filter.filter_all(&refs(hosts, current), req),
        );
        if kept.is_empty() {
            log_emptied(hosts, req, &history, &full);
        }
        (kept, history)
    }

    /// As [`run`](Self::run), letting the filters write to the hosts as nova's do
    /// (pruned allocation candidates, limits); the scheduler runs this one.
    pub fn run_mut(
        &self,
        hosts: &mut [HostState],
        candidates: &[usize],
        req: &FilterRequest<'_>,
    ) -> (Vec<usize>, Vec<FilterStep>) {
        self.run_mut_after(hosts, candidates, req, None)
    }

    /// As [`run_mut`](Self::run_mut) for instance 2..N of a request, when
    /// `candidates` passed the whole chain for the previous instance and the only
    /// host state changed since is `after.consumed`: filters that are
    /// [stable within the request](HostFilter::stable_within_request) are then
    /// evaluated on that host only (every other candidate passed them last time
    /// and nothing they read changed). Same survivors, order, history and side
    /// effects as the full run. `after = None` is the full run.
    pub fn run_mut_after(
        &self,
        hosts: &mut [HostState],
        candidates: &[usize],
        req: &FilterRequest<'_>,
        after: Option<Consumed>,
    ) -> (Vec<usize>, Vec<FilterStep>) {
        // The two visits never run at once; a cell lends the hosts to each in turn.
        let hosts = std::cell::RefCell::new(hosts);
        let (kept, history, full) = self.run_with_after(
            candidates,
            req,
            after,
            |filter, i| filter.filter_host(&mut hosts.borrow_mut()[i], req),
            |filter, current| filter.filter_all(&refs(&hosts.borrow(), current), req),
        );
        let hosts = hosts.into_inner();
        if kept.is_empty() {
            log_emptied(hosts, req, &history, &full);
        }
        (kept, history)
    }

    /// The chain proper. The third result is nova's `full_filter_results` (the
    /// hosts left after each filter, None for the one that left none), kept only
    /// when debug logging is on, as nova builds it only for its debug message.
    fn run_with(
        &self,
        candidates: &[usize],
        req: &FilterRequest<'_>,
        passes: impl FnMut(&dyn HostFilter, usize) -> bool,
        passes_all: impl FnMut(&dyn HostFilter, &[usize]) -> Vec<bool>,
    ) -> (Vec<usize>, Vec<FilterStep>, Vec<FullStep>) {
        self.run_with_after(candidates, req, None, passes, passes_all)
    }

    fn run_with_after(
        &self,
        candidates: &[usize],
        req: &FilterRequest<'_>,
        after: Option<Consumed>,
        mut passes: impl FnMut(&dyn HostFilter, usize) -> bool,
        mut passes_all: impl FnMut(&dyn HostFilter, &[usize]) -> Vec<bool>,
    ) -> (Vec<usize>, Vec<FilterStep>, Vec<FullStep>) {
        let mut current = candidates.to_vec();
        let mut history = Vec::new();
        let mut full = Vec::new();
        let keep_full = tracing::enabled!(Level::DEBUG);
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
            let skip =
                (req.is_rebuild && !filter.run_on_rebuild()) || filter.passes_every_host(req);
            let stable = after.is_some() && filter.stable_within_request(req.spec);
            if !skip && stable {
                // Only the consumed host can change its verdict.
                if let Some(c) = after.and_then(|a| a.consumed) {
                    if let Some(p) = current.iter().position(|&i| i == c) {
                        if !passes(filter.as_ref(), c) {
                            current.remove(p);
                        }
                    }
                }
            } else if !skip && filter.filters_all_at_once() {
                let keep = passes_all(filter.as_ref(), &current);
                let mut kept = keep.into_iter();
                current.retain(|_| kept.next().unwrap_or(false));
            } else if !skip {
                // Hosts are visited in memory order; the survivors keep their order.
                let mut keep = vec![false; current.len()];
                for p in positions_in_memory_order(&current) {
                    keep[p] = passes(filter.as_ref(), current[p]);
                }
                let mut kept = keep.into_iter();
                current.retain(|_| kept.next().unwrap_or(false));
            }
            if let Some(tell) = self.on_filtered.filter(|_| !skip) {
                tell(filter.name(), start, current.len());
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
                if keep_full {
                    full.push((filter.name(), None));
                }
                break;
            }
            if keep_full {
                full.push((filter.name(), Some(current.clone())));
            }
            debug!(
                filter = filter.name(),
                hosts = current.len(),
                "Filter {} returned {} host(s)",
                filter.name(),
                current.len()
            );
        }
        (current, history, full)
    }
}

/// The hosts at `positions`, in that order.
fn refs<'h>(hosts: &'h [HostState], positions: &[usize]) -> Vec<&'h HostState> {
    positions.iter().map(|&i| &hosts[i]).collect()
}

/// What changed since the previous instance's filtering (see
/// [`FilterChain::run_mut_after`]): the host consumed for it, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Consumed {
    pub consumed: Option<usize>,
}

/// One entry of nova's `full_filter_results`: the filter and the hosts it left.
type FullStep = (&'static str, Option<Vec<usize>>);

/// nova's `part_filter_results` as `str()` prints it:
/// `['ComputeFilter: (start: 3, end: 3)', 'RamFilter: (start: 3, end: 0)']`.
pub fn part_results(history: &[FilterStep]) -> String {
    let parts: Vec<String> = history
        .iter()
        .map(|s| {
            let mut out = String::new();
            py::str::repr_into(
                &PyStr::new(&format!(
                    "{}: (start: {}, end: {})",
                    s.filter, s.start, s.end
                )),
                &mut out,
            );
            out
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// nova's `full_filter_results` as `str()` prints it:
/// `[('ComputeFilter', [('host1', 'node1')]), ('RamFilter', None)]`.
fn full_results(hosts: &[HostState], full: &[FullStep]) -> String {
    let repr = |s: &str| {
        let mut out = String::new();
        py::str::repr_into(&PyStr::new(s), &mut out);
        out
    };
    let steps: Vec<String> = full
        .iter()
        .map(|(name, left)| {
            let left = match left {
                None => "None".to_string(),
                Some(ix) => {
                    let pairs: Vec<String> = ix
                        .iter()
                        .map(|&i| {
                            format!("({}, {})", repr(&hosts[i].host), repr(&hosts[i].nodename))
                        })
                        .collect();
                    format!("[{}]", pairs.join(", "))
                }
            };
            format!("({}, {left})", repr(name))
        })
        .collect();
    format!("[{}]", steps.join(", "))
}

/// What nova logs when the filters leave no host: the hosts left after each
/// filter at debug, the per-filter counts at info, both with the instance uuid.
fn log_emptied(
    hosts: &[HostState],
    req: &FilterRequest<'_>,
    history: &[FilterStep],
    full: &[FullStep],
) {
    let uuid = req.spec.instance_uuid.as_deref().unwrap_or("None");
    if !full.is_empty() {
        debug!(
            "Filtering removed all hosts for the request with instance ID '{}'. Filter results: {}",
            uuid,
            full_results(hosts, full)
        );
    }
    info!(
        "Filtering removed all hosts for the request with instance ID '{}'. Filter results: {}",
        uuid,
        part_results(history)
    );
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
            *host.host != *self.1
        }
        fn once_per_request(&self) -> bool {
            self.2
        }
    }

    fn hosts() -> Vec<HostState> {
        ["a", "b", "c"]
            .iter()
            .map(|h| HostState {
                host: (*h).into(),
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
        let (kept, history) = chain.run(&hosts(), &[0, 1, 2], &req);
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
        let (kept, history) = rejecting.run(&hosts(), &[0, 2], &req);
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
        assert_eq!(chain.run(&hosts(), &[0, 1], &second).0, vec![0, 1]);
        let rebuild = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: true,
        };
        let (kept, history) = chain.run(&hosts(), &[0, 1], &rebuild);
        assert_eq!(
            kept,
            vec![0, 1],
            "a filter without RUN_ON_REBUILD passes every host on rebuild"
        );
        assert_eq!(history.len(), 1);
    }
}

#[cfg(test)]
mod log_tests {
    use super::*;

    /// The strings are what CPython's `str()` prints for nova's two lists
    /// (checked with python3: quotes inside a name switch the repr to "...").
    #[test]
    fn emptied_chain_history_is_printed_as_nova_prints_it() {
        let history = vec![
            FilterStep {
                filter: "ComputeFilter",
                start: 3,
                end: 2,
            },
            FilterStep {
                filter: "RamFilter",
                start: 2,
                end: 0,
            },
        ];
        assert_eq!(
            part_results(&history),
            "['ComputeFilter: (start: 3, end: 2)', 'RamFilter: (start: 2, end: 0)']"
        );
        let hosts: Vec<HostState> = [("a", "n-a"), ("o'b", "")]
            .iter()
            .map(|(h, n)| HostState {
                host: (*h).into(),
                nodename: (*n).into(),
                ..Default::default()
            })
            .collect();
        assert_eq!(
            full_results(
                &hosts,
                &[("ComputeFilter", Some(vec![0, 1])), ("RamFilter", None)]
            ),
            r#"[('ComputeFilter', [('a', 'n-a'), ("o'b", '')]), ('RamFilter', None)]"#
        );
    }
}
