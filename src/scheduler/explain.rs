// SPDX-License-Identifier: Apache-2.0
//! Why a request's hosts were removed, and how the survivors weighed: every enabled
//! filter in `enabled_filters` order over every candidate (nova's
//! `get_filtered_objects`), with each removed host and the reason its filter gave,
//! then the weighers' table for the best hosts.
//!
//! The reasons are the debug lines nova's filters log when they reject a host
//! (`ComputeFilter: service is disabled`, ...): our filters log the same lines, and
//! while an explanation runs they are captured by a subscriber scoped to this thread,
//! so no filter carries a second copy of its reasons. That subscriber asks only for
//! the events of the filter, NUMA and PCI modules; every other call site keeps the
//! interest the process's own subscriber gives it.

use super::{ScheduleError, Scheduler};
use crate::filters::FilterRequest;
use crate::model::{HostState, RequestSpec};
use crate::weighers::WeighingExplanation;
use chrono::{DateTime, Utc};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// The modules whose debug lines are a filter's reasons.
const REASON_TARGETS: [&str; 4] = [
    "nova_scheduler::filters",
    "nova_scheduler::numa",
    "nova_scheduler::pci",
    "nova_scheduler::host_fit",
];

/// One filter's part of an explanation.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FilterExplanation {
    pub filter: &'static str,
    pub hosts_in: usize,
    pub hosts_out: usize,
    /// The removed hosts, at most the explanation's bound.
    pub removed: Vec<RemovedHost>,
    /// Removed hosts beyond the bound.
    pub removed_not_listed: usize,
}

/// A host a filter removed, and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RemovedHost {
    pub host: String,
    pub node: String,
    pub reason: String,
}

/// The filters' and weighers' account of one request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Explanation {
    /// The filters that ran, in order; the last one left no host when
    /// `survivors` is 0.
    pub filters: Vec<FilterExplanation>,
    pub survivors: usize,
    /// The weighing of the survivors, best first, cut to the requested number.
    pub weighing: Option<WeighingExplanation>,
}

impl Explanation {
    /// The filter that left no host, if one did.
    pub fn emptied_by(&self) -> Option<&'static str> {
        (self.survivors == 0)
            .then(|| self.filters.last().map(|f| f.filter))
            .flatten()
    }
}

impl Scheduler {
    /// Explains the first instance of `spec` over `hosts` (which are not changed):
    /// the filters with up to `listed` removed hosts each, then the weighing of the
    /// best `top` survivors (none when `top` is 0).
    pub fn explain(
        &self,
        hosts: &[HostState],
        spec: &RequestSpec,
        now: DateTime<Utc>,
        listed: usize,
        top: usize,
    ) -> Result<Explanation, ScheduleError> {
        let mut hosts = hosts.to_vec();
        let req = FilterRequest {
            spec,
            now,
            index: 0,
            is_rebuild: spec.is_rebuild(),
        };
        let lines = Arc::new(Mutex::new(Vec::new()));
        let capture = tracing_subscriber::registry().with(Capture(Arc::clone(&lines)));
        let mut current: Vec<usize> = (0..hosts.len()).collect();
        let mut filters = Vec::new();
        tracing::subscriber::with_default(capture, || {
            for filter in self.filters.filters() {
                if req.is_rebuild && !filter.run_on_rebuild() || filter.passes_every_host(&req) {
                    continue;
                }
                let hosts_in = current.len();
                let mut removed = Vec::new();
                let mut removed_not_listed = 0;
                if filter.filters_all_at_once() {
                    let listed_hosts: Vec<&HostState> =
                        current.iter().map(|&i| &hosts[i]).collect();
                    let reasons = filter.rejection_reasons(&listed_hosts, &req);
                    let mut kept = Vec::with_capacity(current.len());
                    for (&i, reason) in current.iter().zip(reasons) {
                        match reason {
                            None => kept.push(i),
                            Some(reason) if removed.len() < listed => removed.push(RemovedHost {
                                host: hosts[i].host.to_string(),
                                node: hosts[i].nodename.to_string(),
                                reason,
                            }),
                            Some(_) => removed_not_listed += 1,
                        }
                    }
                    current = kept;
                    filters.push(FilterExplanation {
                        filter: filter.name(),
                        hosts_in,
                        hosts_out: current.len(),
                        removed,
                        removed_not_listed,
                    });
                    if current.is_empty() {
                        break;
                    }
                    continue;
                }
                current.retain(|&i| {
                    take(&lines);
                    if filter.filter_host(&mut hosts[i], &req) {
                        return true;
                    }
                    if removed.len() < listed {
                        let reason = take(&lines)
                            .pop()
                            .unwrap_or_else(|| format!("{} returned False", filter.name()));
                        removed.push(RemovedHost {
                            host: hosts[i].host.to_string(),
                            node: hosts[i].nodename.to_string(),
                            reason,
                        });
                    } else {
                        removed_not_listed += 1;
                    }
                    false
                });
                filters.push(FilterExplanation {
                    filter: filter.name(),
                    hosts_in,
                    hosts_out: current.len(),
                    removed,
                    removed_not_listed,
                });
                if current.is_empty() {
                    break;
                }
            }
        });
        let weighing = if top > 0 && !current.is_empty() {
            let (_, mut table) = self.weighers.weigh_explained(&hosts, &current, spec)?;
            table.hosts.truncate(top);
            Some(table)
        } else {
            None
        };
        Ok(Explanation {
            filters,
            survivors: current.len(),
            weighing,
        })
    }
}

fn take(lines: &Mutex<Vec<String>>) -> Vec<String> {
    std::mem::take(&mut *lines.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Collects the reason lines of the filter modules, as `message (field=value, ...)`
/// without the host and node (the explanation names them).
struct Capture(Arc<Mutex<Vec<String>>>);

impl<S: Subscriber> Layer<S> for Capture {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if REASON_TARGETS
            .iter()
            .any(|t| metadata.target().starts_with(t))
        {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>, _: Context<'_, S>) -> bool {
        REASON_TARGETS
            .iter()
            .any(|t| metadata.target().starts_with(t))
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut line = ReasonLine::default();
        event.record(&mut line);
        let mut text = line.message;
        if !line.fields.is_empty() {
            let _ = write!(text, " ({})", line.fields.join(", "));
        }
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(text);
    }
}

#[derive(Default)]
struct ReasonLine {
    message: String,
    fields: Vec<String>,
}

impl Visit for ReasonLine {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "host" | "node" | "nodename" => {}
            name => self.fields.push(format!("{name}={value:?}")),
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_string(),
            "host" | "node" | "nodename" => {}
            name => self.fields.push(format!("{name}={value}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::{FilterChain, HostFilter};
    use crate::weighers::WeigherPipeline;

    /// Rejects hosts whose name ends with one of `suffixes`, logging why as a
    /// filter does.
    struct RejectSuffix(&'static str, &'static [&'static str]);

    impl HostFilter for RejectSuffix {
        fn name(&self) -> &'static str {
            self.0
        }

        fn host_passes(&self, host: &HostState, _: &FilterRequest<'_>) -> bool {
            let bad = self.1.iter().any(|s| host.host.ends_with(s));
            if bad {
                // The target a filter module's line has.
                tracing::debug!(target: "nova_scheduler::filters::test", host = %host.host, why = "suffix",
                    "{}: host is not wanted", self.0);
            }
            !bad
        }
    }

    fn host(name: &str) -> HostState {
        HostState {
            host: name.into(),
            nodename: name.into(),
            ..HostState::default()
        }
    }

    #[test]
    fn each_filter_names_the_hosts_it_removed_with_its_own_reason() {
        let scheduler = Scheduler {
            filters: FilterChain::new(vec![
                Box::new(RejectSuffix("FirstFilter", &["-a"])),
                Box::new(RejectSuffix("SecondFilter", &["-b", "-c"])),
            ]),
            weighers: WeigherPipeline::new(Vec::new()),
            host_subset_size: 1,
            shuffle_best_same_weighed_hosts: false,
            max_attempts: 1,
            packing_host_numa_cells_allocation_strategy: false,
        };
        let hosts = [host("h-a"), host("h-b"), host("h-c"), host("h-d")];
        let spec = RequestSpec::default();
        let e = scheduler
            .explain(&hosts, &spec, Utc::now(), 1, 0)
            .expect("explained");
        assert_eq!(e.survivors, 1);
        assert_eq!(e.emptied_by(), None);
        assert_eq!(e.filters[0].hosts_in, 4);
        assert_eq!(e.filters[0].hosts_out, 3);
        assert_eq!(
            e.filters[0].removed,
            vec![RemovedHost {
                host: "h-a".into(),
                node: "h-a".into(),
                reason: "FirstFilter: host is not wanted (why=suffix)".into(),
            }]
        );
        // Bounded: one listed, one counted.
        assert_eq!(e.filters[1].removed.len(), 1);
        assert_eq!(e.filters[1].removed_not_listed, 1);
        assert_eq!(e.filters[1].removed[0].host, "h-b");
        let none = scheduler
            .explain(&hosts[..1], &spec, Utc::now(), 5, 0)
            .unwrap();
        assert_eq!(none.emptied_by(), Some("FirstFilter"));
    }
}
