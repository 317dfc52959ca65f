// SPDX-License-Identifier: Apache-2.0
//! nova's `_schedule` loop, written once: per instance, sort the hosts, claim on the
//! first host that accepts and consume it; then the sufficiency check (releasing the
//! request's claims when it fails) and the alternates. Where the hosts live and how a
//! list is sorted (host states copied for the request, or the host table's index) is
//! a [`HostSource`].

use super::{
    ClaimError, Claimer, Destination, RequestShape, ScheduleError, ScheduleOutcome,
    ScheduleRequest, Scheduler,
};
use crate::model::{AllocationCandidate, HostState, RequestSpec};
use rand::Rng;
use std::collections::BTreeSet;
use tracing::debug;

/// One of nova's sorted host lists, as a source answers a sort.
pub(super) enum Sorted<List, Decline> {
    /// A list with at least one host, its pick first.
    Hosts(List),
    /// No host is left (the source has logged which filter emptied the list).
    Empty,
    /// The source cannot decide this request as nova would and has done nothing
    /// yet (no claim, no random draw): the request is to be decided another way.
    Declined(Decline),
}

/// Where the hosts of one request live: the decision loop sorts, walks, claims and
/// consumes through it, naming hosts by the source's own numbers.
pub(super) trait HostSource {
    /// A handle on one sorted list.
    type List: Copy;
    /// Where a walk over a list stands.
    type Cursor: Default;
    /// What a declined sort carries (`Infallible` for a source that never declines).
    type Decline;

    /// nova's `_get_sorted_hosts` for instance `index` of the request.
    fn sort<R: Rng + ?Sized>(
        &mut self,
        spec: &RequestSpec,
        index: usize,
        rng: &mut R,
    ) -> Result<Sorted<Self::List, Self::Decline>, ScheduleError>;
    /// The next host of `list` (its pick first); with `same_cell_as`, only hosts of
    /// that host's cell.
    fn next_in_list(
        &self,
        list: Self::List,
        same_cell_as: Option<usize>,
        cursor: &mut Self::Cursor,
    ) -> Option<usize>;
    /// The host's state as the request sees it now.
    fn host(&self, host: usize) -> &HostState;
    /// The host's first allocation candidate.
    fn first_candidate(&self, host: usize) -> Option<&AllocationCandidate>;
    /// nova's `consume_from_request` on `host`.
    fn consume(&mut self, host: usize, spec: &mut RequestSpec, instance_uuid: Option<&str>);
    /// The outcome, with `destinations` naming hosts by the source's numbers.
    fn outcome(self, destinations: Vec<Vec<Destination>>, claimed: Vec<String>) -> ScheduleOutcome;
}

/// What the loop ends with.
pub(super) enum Decided<Decline> {
    Done(Result<ScheduleOutcome, ScheduleError>),
    /// The source declined the first sort; the request comes back untouched but
    /// for `spec.instance_uuid`.
    Declined(Box<ScheduleRequest>, Decline),
}

impl Scheduler {
    /// nova's `_schedule` over `source`.
    pub(super) async fn decide<S: HostSource, C: Claimer, R: Rng + ?Sized>(
        &self,
        mut source: S,
        mut req: ScheduleRequest,
        claimer: &mut C,
        rng: &mut R,
    ) -> Decided<S::Decline> {
        let RequestShape {
            num_instances,
            num_alts,
            claiming,
            iterations,
        } = self.shape_of(&req);
        let mut selected: Vec<Destination> = Vec::new();
        let mut claimed: Vec<String> = Vec::new();
        let mut last: Option<S::List> = None;
        let mut last_index = 0;
        for num in 0..iterations {
            if let Err(e) = claimer.before_instance().await {
                return Decided::Done(released(claimer, &claimed, e).await);
            }
            last_index = num;
            let uuid = req
                .instance_uuids
                .as_ref()
                .and_then(|u| u.get(num))
                .cloned();
            if let Some(u) = &uuid {
                req.spec.instance_uuid = Some(u.clone());
            }
            let list = match source.sort(&req.spec, num, rng) {
                Ok(Sorted::Hosts(list)) => list,
                Ok(Sorted::Empty) => break,
                Ok(Sorted::Declined(why)) => return Decided::Declined(Box::new(req), why),
                Err(e) => return Decided::Done(Err(e)),
            };
            last = Some(list);
            let pick = if claiming {
                let uuid = uuid.clone().unwrap_or_default();
                match claim_first(&mut source, list, &uuid, claimer).await {
                    Ok(Some(pick)) => {
                        claimed.push(uuid);
                        pick
                    }
                    Ok(None) => {
                        debug!("Unable to successfully claim against any host.");
                        break;
                    }
                    // nova leaves earlier claims behind here; they are released.
                    Err(e) => return Decided::Done(released(claimer, &claimed, e).await),
                }
            } else {
                let mut cursor = S::Cursor::default();
                let Some(host) = source.next_in_list(list, None, &mut cursor) else {
                    break;
                };
                Destination {
                    host,
                    allocation_request: None,
                }
            };
            source.consume(pick.host, &mut req.spec, uuid.as_deref());
            selected.push(pick);
        }
        if selected.len() < num_instances {
            debug!(
                hosts = selected.len(),
                required = num_instances,
                "There are not enough hosts available"
            );
            if let Err(e) = claimer.release(&claimed).await {
                return Decided::Done(Err(e.into()));
            }
            return Decided::Done(Err(ScheduleError::NoValidHost {
                reason: "There are not enough hosts available.".into(),
            }));
        }
        if last_index > 0 && num_alts > 0 {
            // Every host may have left the list: then there are no alternates.
            last = match source.sort(&req.spec, last_index, rng) {
                Ok(Sorted::Hosts(list)) => Some(list),
                Ok(_) => None,
                Err(e) => return Decided::Done(Err(e)),
            };
        }
        let destinations = match last {
            Some(list) => with_alternates(&source, list, selected, num_alts, claiming),
            None => selected.into_iter().map(|d| vec![d]).collect(),
        };
        Decided::Done(Ok(source.outcome(destinations, claimed)))
    }
}

/// Releases `claimed`, then fails with `error` (or with the release's own failure).
async fn released<C: Claimer>(
    claimer: &mut C,
    claimed: &[String],
    error: ClaimError,
) -> Result<ScheduleOutcome, ScheduleError> {
    claimer.release(claimed).await?;
    Err(error.into())
}

/// Walks `list` and claims the first candidate of the first host that accepts.
async fn claim_first<S: HostSource, C: Claimer>(
    source: &mut S,
    list: S::List,
    uuid: &str,
    claimer: &mut C,
) -> Result<Option<Destination>, ClaimError> {
    let mut cursor = S::Cursor::default();
    while let Some(host) = source.next_in_list(list, None, &mut cursor) {
        let state = source.host(host);
        let Some(candidate) = source.first_candidate(host) else {
            debug!(host = %state.host, "host has no allocation candidate left; skipped");
            continue;
        };
        if claimer.claim(uuid, state, candidate.json()).await? {
            return Ok(Some(Destination {
                host,
                allocation_request: Some(candidate.json().clone()),
            }));
        }
    }
    Ok(None)
}

/// nova's `_get_alternate_hosts`: each selection plus up to `num_alts` hosts of the
/// same cell that were not selected for this request (and still have a candidate,
/// when claiming), each with its first candidate.
fn with_alternates<S: HostSource>(
    source: &S,
    list: S::List,
    selected: Vec<Destination>,
    num_alts: usize,
    claiming: bool,
) -> Vec<Vec<Destination>> {
    let chosen: BTreeSet<usize> = selected.iter().map(|d| d.host).collect();
    selected
        .into_iter()
        .map(|main| {
            let cell_of = main.host;
            let mut alternates = vec![main];
            let mut cursor = S::Cursor::default();
            while alternates.len() <= num_alts {
                let Some(host) = source.next_in_list(list, Some(cell_of), &mut cursor) else {
                    break;
                };
                if chosen.contains(&host) {
                    continue;
                }
                let allocation_request = if claiming {
                    match source.first_candidate(host) {
                        Some(c) => Some(c.json().clone()),
                        None => continue,
                    }
                } else {
                    None
                };
                alternates.push(Destination {
                    host,
                    allocation_request,
                });
            }
            alternates
        })
        .collect()
}
