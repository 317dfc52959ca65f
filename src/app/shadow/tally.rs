// SPDX-License-Identifier: Apache-2.0
//! The shadow's running comparison: calls seen, instances by verdict, and the
//! disagreements grouped by the first step where the two decisions part, with a
//! few examples each. Served as JSON by the listener's `/shadow` and printed by
//! `shadow report`.

use crate::scheduler::compare::{Answer, Step, Verdict};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// Examples kept per first differing step.
const EXAMPLES_PER_STEP: usize = 5;
/// Decision lags kept for the report's percentiles (the newest).
const LAGS_KEPT: usize = 10_000;

/// One compared instance that differed.
#[derive(Debug, Clone, Serialize)]
pub struct Example {
    pub at: DateTime<Utc>,
    pub instance_uuid: String,
    pub request_id: Option<String>,
    pub ours: Answer,
    pub theirs: Answer,
    pub step: Step,
}

#[derive(Debug, Default)]
struct Counts {
    calls: u64,
    /// Calls that move an instance (the request excludes its current host:
    /// migrate, resize, live migration, evacuate, unshelve elsewhere).
    moves: u64,
    /// Copies that could not be decoded, or a method that is not the scheduler's.
    undecodable: u64,
    casts: u64,
    /// Calls without instance uuids (RPC < 4.4): decided, not compared.
    not_comparable: u64,
    /// Calls decided whose comparison waits for the answering scheduler's claims.
    pending: u64,
    verdicts: BTreeMap<&'static str, u64>,
    steps: BTreeMap<String, (u64, Vec<Example>)>,
    lags: std::collections::VecDeque<f64>,
}

/// The comparison so far.
#[derive(Debug)]
pub struct Tally {
    since: DateTime<Utc>,
    counts: Mutex<Counts>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            since: Utc::now(),
            counts: Mutex::default(),
        }
    }
}

impl Tally {
    fn with<T>(&self, f: impl FnOnce(&mut Counts) -> T) -> T {
        f(&mut self.counts.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// A call decided, `lag` after its copy arrived.
    pub fn call(&self, lag: Duration, comparable: bool, moves: bool) {
        self.with(|c| {
            c.calls += 1;
            if moves {
                c.moves += 1;
            }
            if comparable {
                c.pending += 1;
            } else {
                c.not_comparable += 1;
            }
            if c.lags.len() == LAGS_KEPT {
                c.lags.pop_front();
            }
            c.lags.push_back(lag.as_secs_f64());
        });
    }

    /// A call's comparison is done (its instances were counted).
    pub fn compared(&self) {
        self.with(|c| c.pending = c.pending.saturating_sub(1));
    }

    pub fn cast(&self) {
        self.with(|c| c.casts += 1);
    }

    pub fn undecodable(&self) {
        self.with(|c| c.undecodable += 1);
    }

    /// One instance compared.
    pub fn instance(&self, verdict: &Verdict, example: impl FnOnce() -> Example) {
        self.with(|c| {
            *c.verdicts.entry(verdict.label()).or_default() += 1;
            if let Verdict::Differ(step) = verdict {
                let (n, examples) = c.steps.entry(step.key()).or_default();
                *n += 1;
                if examples.len() < EXAMPLES_PER_STEP {
                    examples.push(example());
                }
            }
        });
    }

    /// The report as `/shadow` serves it.
    pub fn report(&self) -> Value {
        self.with(|c| {
            let count = |k: &str| c.verdicts.get(k).copied().unwrap_or(0);
            let known = count("agree") + count("tie") + count("differ");
            let share = |n: u64| {
                if known == 0 {
                    Value::Null
                } else {
                    json!(n as f64 / known as f64)
                }
            };
            let mut lags: Vec<f64> = c.lags.iter().copied().collect();
            lags.sort_by(f64::total_cmp);
            let pct = |p: f64| {
                (!lags.is_empty())
                    .then(|| lags[((lags.len() - 1) as f64 * p).round() as usize] * 1000.0)
            };
            let mut steps: Vec<(&String, &(u64, Vec<Example>))> = c.steps.iter().collect();
            steps.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(b.0)));
            json!({
                "since": self.since.to_rfc3339(),
                "calls": c.calls,
                "moves": c.moves,
                "casts": c.casts,
                "undecodable": c.undecodable,
                "not_comparable": c.not_comparable,
                "pending": c.pending,
                "instances": {
                    "agree": count("agree"),
                    "tie": count("tie"),
                    "differ": count("differ"),
                    "unknown": count("unknown"),
                },
                "agreement": {
                    "agree": share(count("agree")),
                    "agree_or_tie": share(count("agree") + count("tie")),
                },
                "decision_lag_ms": {"p50": pct(0.5), "p99": pct(0.99), "max": pct(1.0)},
                "differences": steps.iter().map(|(key, (n, examples))| json!({
                    "step": key,
                    "instances": n,
                    "examples": examples,
                })).collect::<Vec<_>>(),
            })
        })
    }
}

/// `shadow report`'s text for a person, from `/shadow`'s JSON.
pub fn render(r: &Value) -> String {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let pct = |v: &Value| {
        v.as_f64()
            .map_or("-".to_string(), |f| format!("{:.2} %", f * 100.0))
    };
    let i = &r["instances"];
    let mut out = format!(
        "shadow since {}: {} call(s) decided ({} move(s)), {} cast(s) followed, {} undecodable\n",
        r["since"].as_str().unwrap_or("-"),
        n(&r["calls"]),
        n(&r["moves"]),
        n(&r["casts"]),
        n(&r["undecodable"]),
    );
    out += &format!(
        "instances: agree {}, tie {}, differ {}, unknown {}\n",
        n(&i["agree"]),
        n(&i["tie"]),
        n(&i["differ"]),
        n(&i["unknown"])
    );
    out += &format!(
        "agreement of the known: agree {}, agree or tie {}\n",
        pct(&r["agreement"]["agree"]),
        pct(&r["agreement"]["agree_or_tie"]),
    );
    let lag = &r["decision_lag_ms"];
    let ms = |v: &Value| v.as_f64().map_or("-".to_string(), |f| format!("{f:.1} ms"));
    out += &format!(
        "decision lag: p50 {}, p99 {}, max {}\n",
        ms(&lag["p50"]),
        ms(&lag["p99"]),
        ms(&lag["max"])
    );
    if n(&r["not_comparable"]) > 0 {
        out += &format!(
            "{} call(s) without instance uuids (RPC < 4.4) were decided, not compared\n",
            n(&r["not_comparable"])
        );
    }
    let differences = r["differences"].as_array().cloned().unwrap_or_default();
    if differences.is_empty() {
        out += "no disagreement\n";
        return out;
    }
    out += "disagreements by first differing step:\n";
    for d in &differences {
        out += &format!(
            "  {}: {} instance(s)\n",
            d["step"].as_str().unwrap_or("-"),
            n(&d["instances"])
        );
        for e in d["examples"].as_array().into_iter().flatten() {
            out += &format!(
                "    instance {} ({}): ours {}, theirs {}{}\n",
                e["instance_uuid"].as_str().unwrap_or("-"),
                e["request_id"].as_str().unwrap_or("-"),
                answer(&e["ours"]),
                answer(&e["theirs"]),
                detail(&e["step"]),
            );
        }
    }
    out
}

fn answer(a: &Value) -> String {
    match a["result"].as_str() {
        Some("placed") => a["host"].as_str().unwrap_or("-").to_string(),
        Some(other) => other.to_string(),
        None => "-".to_string(),
    }
}

fn detail(step: &Value) -> String {
    match step["step"].as_str() {
        Some("filter") => format!(
            "; {} removed theirs: {}",
            step["filter"].as_str().unwrap_or("-"),
            step["reason"].as_str().unwrap_or("-")
        ),
        Some("weigher") => {
            let c = |v: &Value| {
                format!(
                    "{:.3} x {:.3} = {:.3}",
                    v["multiplier"].as_f64().unwrap_or(0.0),
                    v["normalized"].as_f64().unwrap_or(0.0),
                    v["value"].as_f64().unwrap_or(0.0)
                )
            };
            format!(
                "; {} gave ours {}, theirs {}",
                step["weigher"].as_str().unwrap_or("-"),
                c(&step["ours"]),
                c(&step["theirs"])
            )
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::compare::Contribution;

    #[test]
    fn the_report_groups_differences_by_step_and_counts_agreement() {
        let t = Tally::default();
        t.call(Duration::from_millis(4), true, false);
        t.call(Duration::from_millis(8), true, true);
        let placed = |h: &str| Answer::Placed {
            host: h.into(),
            node: h.into(),
        };
        t.instance(&Verdict::Agree, || unreachable!());
        t.instance(&Verdict::Tie, || unreachable!());
        let step = Step::Weigher {
            weigher: "RAMWeigher".into(),
            ours: Contribution {
                normalized: 1.0,
                multiplier: 1.0,
                value: 1.0,
            },
            theirs: Contribution {
                normalized: 0.0,
                multiplier: 1.0,
                value: 0.0,
            },
        };
        t.instance(&Verdict::Differ(step.clone()), || Example {
            at: Utc::now(),
            instance_uuid: "u1".into(),
            request_id: Some("req-1".into()),
            ours: placed("a"),
            theirs: placed("b"),
            step: step.clone(),
        });
        t.instance(&Verdict::Unknown, || unreachable!());
        let r = t.report();
        assert_eq!(r["calls"], 2);
        assert_eq!(r["moves"], 1);
        assert_eq!(r["instances"]["differ"], 1);
        assert_eq!(r["agreement"]["agree_or_tie"], json!(2.0 / 3.0));
        assert_eq!(r["differences"][0]["step"], "weigher:RAMWeigher");
        let text = render(&r);
        assert!(text.contains("weigher:RAMWeigher: 1 instance(s)"), "{text}");
        assert!(
            text.contains("ours a, theirs b; RAMWeigher gave ours 1.000 x 1.000 = 1.000"),
            "{text}"
        );
        assert!(text.contains("agree or tie 66.67 %"), "{text}");
    }
}
