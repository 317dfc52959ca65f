// SPDX-License-Identifier: Apache-2.0
//! Where two schedulers part on one instance: another scheduler's choice (nova's,
//! or a recording's) against ours, read off the filters' and weighers' account of
//! the request ([`Scheduler::explain`](super::Scheduler::explain) with every removed
//! host listed and every survivor weighed).
//!
//! The account is of the request's first instance over the hosts as they were
//! before the call: a later instance of the same call is placed on hosts the
//! earlier ones consumed, which the account does not show (its difference is put
//! down to that consumption when nothing else explains it).

use super::explain::Explanation;
use serde::{Deserialize, Serialize};

/// What a scheduler answered for one instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Answer {
    /// Placed on this compute host and node.
    Placed { host: String, node: String },
    /// No host was found (nova's NoValidHost).
    NoValidHost,
    /// Not known (the other scheduler's answer was never seen).
    Unknown,
}

/// How two answers for one instance compare.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub enum Verdict {
    /// The same host (or both found none).
    Agree,
    /// Different hosts of the same top weight (or within `host_subset_size`'s
    /// random pick): either scheduler could have chosen either.
    Tie,
    /// The first step at which the two decisions part.
    Differ(Step),
    /// The other scheduler's answer is not known.
    Unknown,
}

impl Verdict {
    /// The label of metrics and reports: `agree`, `tie`, `differ`, `unknown`.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Agree => "agree",
            Verdict::Tie => "tie",
            Verdict::Differ(_) => "differ",
            Verdict::Unknown => "unknown",
        }
    }
}

/// The first step of the decision at which ours leaves the other scheduler's host
/// behind.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "step")]
pub enum Step {
    /// One side placed the instance and the other found no host.
    Outcome { ours_placed: bool },
    /// The other's host was not among our candidates (Placement or the provider
    /// index did not return it, or it is unknown to our cells).
    Candidates,
    /// A filter removed the other's host.
    Filter { filter: String, reason: String },
    /// Both hosts passed the filters and this weigher ordered ours above the
    /// other's by the widest margin (each side's `multiplier × normalized`).
    Weigher {
        weigher: String,
        ours: Contribution,
        theirs: Contribution,
    },
    /// Before the call the other's host weighed at least as much as ours: the
    /// call's earlier instances (or our weights' moment) moved it.
    Consumption,
}

impl Step {
    /// The step as reports group it: `outcome`, `candidates`, `filter:<Name>`,
    /// `weigher:<Name>`, `consumption`.
    pub fn key(&self) -> String {
        match self {
            Step::Outcome { .. } => "outcome".into(),
            Step::Candidates => "candidates".into(),
            Step::Filter { filter, .. } => format!("filter:{filter}"),
            Step::Weigher { weigher, .. } => format!("weigher:{weigher}"),
            Step::Consumption => "consumption".into(),
        }
    }
}

/// One weigher's part of a host's weight.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Contribution {
    pub normalized: f64,
    pub multiplier: f64,
    /// `multiplier × normalized`.
    pub value: f64,
}

/// Compares `theirs` with `ours` for one instance, by `explanation` (every removed
/// host listed, every survivor weighed). `host_subset_size` is ours: above 1, a
/// host among the best that many is a tie.
pub fn compare(
    explanation: &Explanation,
    ours: &Answer,
    theirs: &Answer,
    host_subset_size: usize,
) -> Verdict {
    let (ours_host, theirs_host) = match (ours, theirs) {
        (_, Answer::Unknown) | (Answer::Unknown, _) => return Verdict::Unknown,
        (Answer::NoValidHost, Answer::NoValidHost) => return Verdict::Agree,
        (Answer::NoValidHost, Answer::Placed { .. }) => {
            return Verdict::Differ(Step::Outcome { ours_placed: false })
        }
        (Answer::Placed { .. }, Answer::NoValidHost) => {
            return Verdict::Differ(Step::Outcome { ours_placed: true })
        }
        (
            Answer::Placed { host, node },
            Answer::Placed {
                host: their_host,
                node: their_node,
            },
        ) => ((host, node), (their_host, their_node)),
    };
    if same(ours_host, theirs_host) {
        return Verdict::Agree;
    }
    let is = |h: &str, n: &str, (host, node): (&String, &String)| {
        h.eq_ignore_ascii_case(host) && n == node
    };
    for f in &explanation.filters {
        if let Some(removed) = f.removed.iter().find(|r| is(&r.host, &r.node, theirs_host)) {
            return Verdict::Differ(Step::Filter {
                filter: f.filter.to_string(),
                reason: removed.reason.clone(),
            });
        }
    }
    let Some(weighing) = &explanation.weighing else {
        // A single survivor is not weighed: the other's host was no candidate.
        return Verdict::Differ(Step::Candidates);
    };
    let position = |target: (&String, &String)| {
        weighing
            .hosts
            .iter()
            .position(|h| is(&h.host, &h.nodename, target))
    };
    let Some(t) = position(theirs_host) else {
        return Verdict::Differ(Step::Candidates);
    };
    let theirs_w = &weighing.hosts[t];
    let Some(o) = position(ours_host) else {
        // Our host was not a survivor over the starting state: only the call's
        // own consumption can have moved things.
        return Verdict::Differ(Step::Consumption);
    };
    let ours_w = &weighing.hosts[o];
    let subset = host_subset_size.max(1);
    if same_weight(ours_w.weight, theirs_w.weight) || (subset > 1 && t < subset && o < subset) {
        return Verdict::Tie;
    }
    if theirs_w.weight > ours_w.weight {
        return Verdict::Differ(Step::Consumption);
    }
    let widest = ours_w
        .scores
        .iter()
        .zip(&theirs_w.scores)
        .map(|(a, b)| (a, b, a.contribution - b.contribution))
        .filter(|(_, _, margin)| *margin > 0.0)
        .max_by(|x, y| x.2.total_cmp(&y.2));
    match widest {
        Some((a, b, _)) => Verdict::Differ(Step::Weigher {
            weigher: a.weigher.to_string(),
            ours: Contribution {
                normalized: a.normalized,
                multiplier: a.multiplier,
                value: a.contribution,
            },
            theirs: Contribution {
                normalized: b.normalized,
                multiplier: b.multiplier,
                value: b.contribution,
            },
        }),
        None => Verdict::Differ(Step::Consumption),
    }
}

fn same((a_host, a_node): (&String, &String), (b_host, b_node): (&String, &String)) -> bool {
    a_host.eq_ignore_ascii_case(b_host) && a_node == b_node
}

/// Equal sums of floating-point contributions, as nova's sort sees them.
fn same_weight(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::explain::{FilterExplanation, RemovedHost};
    use crate::weighers::{HostWeighing, WeigherScore, WeighingExplanation};

    fn placed(host: &str) -> Answer {
        Answer::Placed {
            host: host.into(),
            node: host.into(),
        }
    }

    fn score(weigher: &'static str, normalized: f64, multiplier: f64) -> WeigherScore {
        WeigherScore {
            weigher,
            raw: normalized,
            normalized,
            multiplier,
            contribution: normalized * multiplier,
        }
    }

    fn weighed(host: &str, scores: Vec<WeigherScore>) -> HostWeighing {
        HostWeighing {
            index: 0,
            host: host.into(),
            nodename: host.into(),
            weight: scores.iter().map(|s| s.contribution).sum(),
            scores,
        }
    }

    /// a > b by RAM, b > a by CPU less; c was removed by ComputeFilter.
    fn account() -> Explanation {
        let mut hosts = vec![
            weighed(
                "a",
                vec![score("RAMWeigher", 1.0, 1.0), score("CPUWeigher", 0.0, 1.0)],
            ),
            weighed(
                "b",
                vec![score("RAMWeigher", 0.2, 1.0), score("CPUWeigher", 0.5, 1.0)],
            ),
            weighed(
                "d",
                vec![score("RAMWeigher", 0.4, 1.0), score("CPUWeigher", 0.3, 1.0)],
            ),
        ];
        hosts.sort_by(|x, y| y.weight.total_cmp(&x.weight));
        Explanation {
            filters: vec![FilterExplanation {
                filter: "ComputeFilter",
                hosts_in: 4,
                hosts_out: 3,
                removed: vec![RemovedHost {
                    host: "c".into(),
                    node: "c".into(),
                    reason: "service is disabled".into(),
                }],
                removed_not_listed: 0,
            }],
            survivors: 3,
            weighing: Some(WeighingExplanation {
                weighers: vec!["RAMWeigher", "CPUWeigher"],
                hosts,
            }),
        }
    }

    #[test]
    fn the_same_host_agrees_and_unknown_stays_unknown() {
        let e = account();
        assert_eq!(compare(&e, &placed("a"), &placed("A"), 1), Verdict::Agree);
        assert_eq!(
            compare(&e, &Answer::NoValidHost, &Answer::NoValidHost, 1),
            Verdict::Agree
        );
        assert_eq!(
            compare(&e, &placed("a"), &Answer::Unknown, 1),
            Verdict::Unknown
        );
    }

    #[test]
    fn equal_weights_and_the_random_subset_are_ties() {
        let e = account();
        // b and d both weigh 0.7 after a's 1.0.
        assert_eq!(compare(&e, &placed("d"), &placed("b"), 1), Verdict::Tie);
        assert_eq!(compare(&e, &placed("a"), &placed("d"), 3), Verdict::Tie);
        assert_ne!(compare(&e, &placed("a"), &placed("d"), 1), Verdict::Tie);
    }

    #[test]
    fn the_first_differing_step_is_named() {
        let e = account();
        assert_eq!(
            compare(&e, &placed("a"), &placed("c"), 1),
            Verdict::Differ(Step::Filter {
                filter: "ComputeFilter".into(),
                reason: "service is disabled".into()
            })
        );
        assert_eq!(
            compare(&e, &placed("a"), &placed("z"), 1),
            Verdict::Differ(Step::Candidates)
        );
        match compare(&e, &placed("a"), &placed("b"), 1) {
            Verdict::Differ(Step::Weigher {
                weigher,
                ours,
                theirs,
            }) => {
                assert_eq!(weigher, "RAMWeigher");
                assert_eq!((ours.value, theirs.value), (1.0, 0.2));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            compare(&e, &placed("b"), &placed("a"), 1),
            Verdict::Differ(Step::Consumption)
        );
        assert_eq!(
            compare(&e, &Answer::NoValidHost, &placed("a"), 1),
            Verdict::Differ(Step::Outcome { ours_placed: false })
        );
    }
}
