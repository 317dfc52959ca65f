// SPDX-License-Identifier: Apache-2.0
//! Decisions without a write: the decision core over host states that keep the
//! consumption of the decisions made before (as the daemon's warm cache keeps it
//! with `retain_virtual_consumption`), claims recorded in memory only.

use crate::model::{AllocationCandidate, HostState, RequestSpec};
use crate::placement::index::ProviderIndex;
use crate::scheduler::{ClaimError, Claimer, ScheduleError, ScheduleRequest, Scheduler};
use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Allocation candidates by provider uuid (a candidate naming several providers is
/// listed under each), in Placement's order.
pub type ByProvider = HashMap<String, Vec<AllocationCandidate>>;

/// The candidates of an answer by provider, as the manager indexes them.
pub fn by_provider(candidates: Vec<AllocationCandidate>) -> ByProvider {
    let mut out = ByProvider::new();
    for c in candidates {
        let providers: Vec<String> = c.providers().iter().map(|p| p.to_string()).collect();
        let Some((last, others)) = providers.split_last() else {
            continue;
        };
        for rp in others {
            out.entry(rp.clone()).or_default().push(c.clone());
        }
        // Most candidates name one provider: moved, not copied.
        out.entry(last.clone()).or_default().push(c);
    }
    out
}

/// `(provider, resource class, amount)` of an allocation request.
pub fn amounts(allocation_request: &Value) -> Vec<(String, String, i64)> {
    let mut out = Vec::new();
    let Some(allocations) = allocation_request
        .get("allocations")
        .and_then(Value::as_object)
    else {
        return out;
    };
    for (rp, a) in allocations {
        if let Some(resources) = a.get("resources").and_then(Value::as_object) {
            for (rc, n) in resources {
                out.push((rp.clone(), rc.clone(), n.as_i64().unwrap_or(0)));
            }
        }
    }
    out
}

/// What Placement would hold, kept in memory: whether an allocation request
/// still fits, and the claims taken from it.
pub trait Ledger {
    fn fits(&self, allocation_request: &Value) -> bool;
    fn take(&mut self, allocation_request: &Value);
    fn give_back(&mut self, allocation_request: &Value);
}

/// Capacity and usage per provider and class, as the provider summaries of a
/// `GET /allocation_candidates` answer give them (`capacity` is Placement's
/// `int((total - reserved) * allocation_ratio)`).
#[derive(Debug, Clone, Default)]
pub struct Room {
    pub providers: BTreeMap<String, BTreeMap<String, ClassRoom>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassRoom {
    pub capacity: i64,
    pub used: i64,
}

impl Room {
    /// Adds an answer's `provider_summaries` (a provider already known keeps the
    /// usage recorded so far).
    pub fn add_summaries(&mut self, summaries: &Map<String, Value>) {
        for (rp, summary) in summaries {
            if self.providers.contains_key(rp) {
                continue;
            }
            let classes = summary
                .get("resources")
                .and_then(Value::as_object)
                .map(|r| {
                    r.iter()
                        .map(|(rc, v)| {
                            let n = |k: &str| v.get(k).and_then(Value::as_i64).unwrap_or(0);
                            (
                                rc.clone(),
                                ClassRoom {
                                    capacity: n("capacity"),
                                    used: n("used"),
                                },
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            self.providers.insert(rp.clone(), classes);
        }
    }

    /// What is left of `rc` on `rp`.
    pub fn left(&self, rp: &str, rc: &str) -> i64 {
        self.providers
            .get(rp)
            .and_then(|p| p.get(rc))
            .map_or(0, |c| c.capacity - c.used)
    }
}

impl Ledger for Room {
    fn fits(&self, ar: &Value) -> bool {
        let mut want: BTreeMap<(String, String), i64> = BTreeMap::new();
        for (rp, rc, n) in amounts(ar) {
            *want.entry((rp, rc)).or_default() += n;
        }
        want.iter().all(|((rp, rc), n)| self.left(rp, rc) >= *n)
    }

    fn take(&mut self, ar: &Value) {
        for (rp, rc, n) in amounts(ar) {
            let class = self.providers.entry(rp).or_default().entry(rc).or_default();
            class.used += n;
        }
    }

    fn give_back(&mut self, ar: &Value) {
        for (rp, rc, n) in amounts(ar) {
            if let Some(class) = self.providers.get_mut(&rp).and_then(|p| p.get_mut(&rc)) {
                class.used -= n;
            }
        }
    }
}

/// The provider index as a ledger: Placement's own capacity rule
/// ([`crate::placement::index::Inventory::fits`]) on its usages.
impl Ledger for ProviderIndex {
    fn fits(&self, ar: &Value) -> bool {
        let mut before: BTreeMap<(i64, i64), i64> = BTreeMap::new();
        for (rp, rc, n) in amounts(ar) {
            let (Some(p), Some(rc_id)) = (self.provider(&rp), self.resource_classes.id(&rc)) else {
                return false;
            };
            let Some(inv) = p.inventories.get(&rc_id) else {
                return false;
            };
            let earlier = before.entry((p.id, rc_id)).or_default();
            if !inv.fits(p.used(rc_id) + *earlier, n) {
                return false;
            }
            *earlier += n;
        }
        true
    }

    fn take(&mut self, ar: &Value) {
        self.apply_claim(&grouped(ar, 1));
    }

    fn give_back(&mut self, ar: &Value) {
        self.apply_claim(&grouped(ar, -1));
    }
}

fn grouped(ar: &Value, sign: i64) -> Vec<(String, Vec<(String, i64)>)> {
    let mut by_rp: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
    for (rp, rc, n) in amounts(ar) {
        by_rp.entry(rp).or_default().push((rc, sign * n));
    }
    by_rp.into_iter().collect()
}

/// A [`Claimer`] that writes nothing: a claim is taken from the ledger when it
/// fits there, and given back when the request fails.
pub struct MemoryClaims<'l, L: Ledger> {
    ledger: &'l mut L,
    held: Vec<(String, Value)>,
}

impl<'l, L: Ledger> MemoryClaims<'l, L> {
    pub fn new(ledger: &'l mut L) -> Self {
        MemoryClaims {
            ledger,
            held: Vec::new(),
        }
    }
}

impl<L: Ledger> Claimer for MemoryClaims<'_, L> {
    async fn claim(
        &mut self,
        instance_uuid: &str,
        _host: &HostState,
        allocation_request: &Value,
    ) -> Result<bool, ClaimError> {
        if !self.ledger.fits(allocation_request) {
            return Ok(false);
        }
        self.ledger.take(allocation_request);
        self.held
            .push((instance_uuid.to_string(), allocation_request.clone()));
        Ok(true)
    }

    async fn release(&mut self, instance_uuids: &[String]) -> Result<(), ClaimError> {
        let (back, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(u, _)| instance_uuids.contains(u));
        for (_, ar) in &back {
            self.ledger.give_back(ar);
        }
        self.held = keep;
        Ok(())
    }
}

/// One instance placed: the host it went to, then its alternates (indices into
/// [`Planner::hosts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub instance_uuid: String,
    pub host: usize,
    pub alternates: Vec<usize>,
}

/// Decides requests one after the other over the same host states: each decision
/// sees the virtual consumption of the earlier ones, as the daemon's cached host
/// states keep it until the compute node reports (`retain_virtual_consumption`).
pub struct Planner {
    pub scheduler: Scheduler,
    /// Every host state, consumed by the decisions so far. A decision replaces the
    /// states of the hosts it chose (same node, same uuid); none is added.
    pub hosts: Vec<HostState>,
    /// The places in `hosts` of each compute node uuid: a request looks up its
    /// candidates' nodes (hundreds) rather than every node (thousands) in its
    /// candidates.
    by_uuid: HashMap<Arc<str>, Vec<usize>>,
    rng: StdRng,
}

impl Planner {
    pub fn new(scheduler: Scheduler, hosts: Vec<HostState>, seed: u64) -> Self {
        let mut by_uuid: HashMap<Arc<str>, Vec<usize>> = HashMap::new();
        for (i, h) in hosts.iter().enumerate() {
            if let Some(u) = &h.uuid {
                by_uuid.entry(Arc::clone(u)).or_default().push(i);
            }
        }
        Planner {
            scheduler,
            hosts,
            by_uuid,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// The hosts a request with `candidates` is decided over: every host state with
    /// a candidate (in host-state order, as the daemon reads them), each holding its
    /// candidates; and each one's place in [`Planner::hosts`].
    pub fn request_hosts(&self, candidates: &ByProvider) -> (Vec<HostState>, Vec<usize>) {
        let mut found: Vec<(usize, &Vec<AllocationCandidate>)> = candidates
            .iter()
            .filter(|(_, list)| !list.is_empty())
            .filter_map(|(rp, list)| Some((self.by_uuid.get(rp.as_str())?, list)))
            .flat_map(|(places, list)| places.iter().map(move |&i| (i, list)))
            .collect();
        found.sort_unstable_by_key(|(i, _)| *i);
        let mut request_hosts = Vec::with_capacity(found.len());
        let mut origin = Vec::with_capacity(found.len());
        for (i, list) in found {
            let mut h = self.hosts[i].clone();
            h.allocation_candidates = list.clone();
            request_hosts.push(h);
            origin.push(i);
        }
        (request_hosts, origin)
    }

    /// One `select_destinations` for `instance_uuids`: the hosts with a candidate in
    /// `candidates` ([`Planner::request_hosts`]), filtered, weighed and claimed in
    /// `ledger` as the daemon's decision core does; the chosen hosts keep their
    /// consumption for the next request.
    pub async fn decide<L: Ledger>(
        &mut self,
        spec: &RequestSpec,
        instance_uuids: Vec<String>,
        candidates: &ByProvider,
        ledger: &mut L,
        now: DateTime<Utc>,
    ) -> Result<Vec<Placed>, ScheduleError> {
        self.decide_keeping_previous(spec, instance_uuids, candidates, ledger, now)
            .await
            .map(|(placed, _)| placed)
    }

    /// [`Planner::decide`], also giving back the states the chosen hosts had before
    /// (by place in [`Planner::hosts`]), from which the request's hosts as they were
    /// can be rebuilt without copying them all beforehand.
    pub async fn decide_keeping_previous<L: Ledger>(
        &mut self,
        spec: &RequestSpec,
        instance_uuids: Vec<String>,
        candidates: &ByProvider,
        ledger: &mut L,
        now: DateTime<Utc>,
    ) -> Result<(Vec<Placed>, Vec<(usize, HostState)>), ScheduleError> {
        let (request_hosts, origin) = self.request_hosts(candidates);
        if request_hosts.is_empty() {
            return Err(ScheduleError::NoValidHost {
                reason: String::new(),
            });
        }
        let request = ScheduleRequest {
            spec: spec.clone(),
            instance_uuids: Some(instance_uuids.clone()),
            use_placement: true,
            return_alternates: true,
            now,
        };
        let mut claimer = MemoryClaims::new(ledger);
        let outcome = self
            .scheduler
            .schedule(request_hosts, request, &mut claimer, &mut self.rng)
            .await?;
        let mut placed = Vec::new();
        for (uuid, list) in instance_uuids.iter().zip(&outcome.destinations) {
            let Some(first) = list.first() else { continue };
            placed.push(Placed {
                instance_uuid: uuid.clone(),
                host: origin[first.host],
                alternates: list[1..].iter().map(|d| origin[d.host]).collect(),
            });
        }
        let mut chosen: Vec<usize> = outcome
            .destinations
            .iter()
            .filter_map(|l| l.first().map(|d| d.host))
            .collect();
        chosen.sort_unstable();
        chosen.dedup();
        let mut previous = Vec::with_capacity(chosen.len());
        for i in chosen {
            let mut h = outcome.hosts[i].clone();
            // What a request leaves on a host beyond its consumption is not kept:
            // the next request reads it afresh.
            h.allocation_candidates = Vec::new();
            h.limits = BTreeMap::new();
            previous.push((origin[i], std::mem::replace(&mut self.hosts[origin[i]], h)));
        }
        Ok((placed, previous))
    }
}
