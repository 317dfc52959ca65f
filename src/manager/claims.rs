// SPDX-License-Identifier: Apache-2.0
//! The core's [`Claimer`] over Placement, with nova's rules: a consumer-generation
//! conflict fails the request; any other failure to claim moves on to the next host.
//!
//! Beyond nova: every claim of a request keeps only what the instance held before
//! the request (see [`ConsumerClaim`]), so a claim whose answer was lost, or one an
//! earlier delivery of the request made, is replaced and never doubled; a failed
//! request puts each instance it may have written back as it was. The request
//! stops before its next claim once its caller has stopped waiting.

use super::read_ahead::AllocationReadAhead;
use crate::model::HostState;
use crate::placement::index::LiveIndex;
use crate::placement::{beyond_the_caller, ConsumerClaim, PlacementClient, PlacementError};
use crate::scheduler::{ClaimError, Claimer};
use rustc_hash::FxHashMap;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tracing::{debug, error, warn};

/// Time a request's claims (and their release) spent waiting on Placement: the
/// part of the schedule phase that is not our own work.
#[derive(Default)]
pub(super) struct ClaimTime(AtomicU64);

impl ClaimTime {
    pub(super) fn add(&self, since: Instant) {
        let nanos = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_add(nanos, Ordering::Relaxed);
    }

    pub(super) fn total(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

pub struct PlacementClaims<'a> {
    placement: &'a PlacementClient,
    /// The provider index: a claim is recorded in it at once; a refused claim
    /// refreshes it, so the next decisions see what Placement saw.
    index: Option<&'a LiveIndex>,
    project_id: String,
    user_id: String,
    global_request_id: Option<String>,
    /// The instances' current allocations, read while the candidates were asked for.
    read_ahead: Option<AllocationReadAhead>,
    /// Where the time spent waiting on Placement is added up.
    waited: &'a ClaimTime,
    /// What the request knows of each instance it claimed for.
    consumers: FxHashMap<String, ConsumerClaim>,
    /// When the caller stops waiting: no claim is made after it.
    deadline: Option<Instant>,
    /// Claims not made on a host (refused, or Placement failed): the first logged
    /// at once, the others in one line when the request ends.
    not_made: NotMade,
}

/// How many hosts to name in the line that sums up a request's claims not made.
const HOSTS_NAMED: usize = 3;

#[derive(Default)]
struct NotMade {
    count: u32,
    /// The hosts after the first, with why (at most [`HOSTS_NAMED`]).
    named: Vec<String>,
}

impl NotMade {
    fn note(&mut self, host: &str, instance: &str, why: &str) {
        self.count += 1;
        if self.count == 1 {
            warn!(
                host,
                instance,
                reason = why,
                "claim not made; trying the next host"
            );
        } else {
            debug!(
                host,
                instance,
                reason = why,
                "claim not made; trying the next host"
            );
            if self.named.len() < HOSTS_NAMED {
                self.named.push(format!("{host} ({why})"));
            }
        }
    }
}

impl<'a> PlacementClaims<'a> {
    pub fn new(
        placement: &'a PlacementClient,
        index: Option<&'a LiveIndex>,
        project_id: String,
        user_id: String,
        global_request_id: Option<String>,
        waited: &'a ClaimTime,
    ) -> Self {
        PlacementClaims {
            placement,
            index,
            project_id,
            user_id,
            global_request_id,
            read_ahead: None,
            waited,
            consumers: FxHashMap::default(),
            deadline: None,
            not_made: NotMade::default(),
        }
    }

    /// Claims build on the allocations `read_ahead` read instead of reading them.
    pub fn with_read_ahead(mut self, read_ahead: Option<AllocationReadAhead>) -> Self {
        self.read_ahead = read_ahead;
        self
    }

    /// No claim is made after `deadline` (the caller's).
    pub fn with_deadline(mut self, deadline: Option<Instant>) -> Self {
        self.deadline = deadline;
        self
    }

    /// The providers earlier deliveries of this request claimed, per instance
    /// (see [`super::redelivery::earlier_claims`]).
    pub fn with_earlier_claims(mut self, earlier: FxHashMap<String, Vec<String>>) -> Self {
        for (uuid, providers) in earlier {
            self.consumers
                .insert(uuid, ConsumerClaim::with_earlier_claims(providers));
        }
        self
    }

    fn past_deadline(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

impl Drop for PlacementClaims<'_> {
    fn drop(&mut self) {
        let NotMade { count, named } = &self.not_made;
        if *count > 1 {
            let more = (*count as usize - 1).saturating_sub(named.len());
            let hosts = if more > 0 {
                format!("{} and {more} more", named.join(", "))
            } else {
                named.join(", ")
            };
            warn!(
                claims_not_made = count,
                hosts = %hosts,
                "claims not made on {} more host(s) for this request (the first is logged above)",
                count - 1
            );
        }
    }
}

impl Claimer for PlacementClaims<'_> {
    async fn claim(
        &mut self,
        instance_uuid: &str,
        host: &HostState,
        allocation_request: &Value,
    ) -> Result<bool, ClaimError> {
        if self.past_deadline() {
            return Err(caller_gone());
        }
        let asked = Instant::now();
        let current = match self.read_ahead.as_mut() {
            Some(read_ahead) => read_ahead.take(instance_uuid).await,
            None => None,
        };
        let record = self.consumers.entry(instance_uuid.to_string()).or_default();
        let claimed = self
            .placement
            .claim_resources_from(
                instance_uuid,
                allocation_request,
                &self.project_id,
                &self.user_id,
                self.global_request_id.as_deref(),
                current,
                record,
            )
            .await;
        self.waited.add(asked);
        let result = match &claimed {
            Ok(true) => "claimed",
            Ok(false) => "conflict",
            Err(_) => "failed",
        };
        crate::observe::metrics().claim("per_instance", result);
        match claimed {
            Ok(true) => {
                if let Some(index) = self.index {
                    index.apply_claim(allocation_request);
                }
                Ok(true)
            }
            Ok(false) => {
                if let Some(why) = self
                    .consumers
                    .get_mut(instance_uuid)
                    .and_then(ConsumerClaim::take_failure)
                {
                    self.not_made.note(&host.host, instance_uuid, &why);
                }
                if let Some(index) = self.index {
                    // A stale view: read what Placement has before the next host.
                    if let Err(e) = index.refresh().await {
                        warn!(error = %e, "could not refresh the placement provider index");
                    }
                }
                Ok(false)
            }
            Err(PlacementError::AllocationUpdateFailed {
                consumer_uuid,
                error,
            }) => Err(ClaimError::AllocationUpdateFailed {
                consumer_uuid,
                error,
            }),
            Err(e) => {
                self.not_made
                    .note(&host.host, instance_uuid, &e.to_string());
                Ok(false)
            }
        }
    }

    /// Takes back every claim of the request, and whatever it may have written
    /// without knowing (a lost answer, an earlier delivery): an instance that held
    /// nothing before the request has its allocations deleted (nova's cleanup); one
    /// that held some (an evacuation) gets them back. Keeps going past a failure so
    /// no claim is left behind, then reports the first failure on a claim it made
    /// as `AllocationDeleteFailed`.
    async fn release(&mut self, instance_uuids: &[String]) -> Result<(), ClaimError> {
        beyond_the_caller(self.release_now(instance_uuids)).await
    }

    /// Lets other requests run between instances (a decision never holds a runtime
    /// thread for a whole request), and stops one whose caller has gone.
    async fn before_instance(&mut self) -> Result<(), ClaimError> {
        tokio::task::yield_now().await;
        if self.past_deadline() {
            return Err(caller_gone());
        }
        Ok(())
    }
}

impl PlacementClaims<'_> {
    /// [`Claimer::release`], run to its end even after the caller has gone.
    async fn release_now(&mut self, instance_uuids: &[String]) -> Result<(), ClaimError> {
        let asked = Instant::now();
        let mut first_error = None;
        let mut uuids: Vec<&String> = instance_uuids.iter().collect();
        for (uuid, record) in &self.consumers {
            if record.needs_release() && !instance_uuids.contains(uuid) {
                uuids.push(uuid);
            }
        }
        for uuid in uuids {
            let record = self.consumers.get(uuid.as_str());
            let outcome = match record {
                Some(record) if record.baseline().is_some() => {
                    self.placement
                        .restore_allocations(
                            uuid,
                            record.baseline(),
                            &self.project_id,
                            &self.user_id,
                        )
                        .await
                }
                // Never read by this request (it failed before claiming for it):
                // what it held, less an earlier delivery's claims, is what it keeps.
                Some(record) => match self.placement.current_allocations(uuid, None).await {
                    Ok(read) => {
                        let baseline = record.baseline_from(read.json().as_ref());
                        self.placement
                            .restore_allocations(
                                uuid,
                                Some(&baseline),
                                &self.project_id,
                                &self.user_id,
                            )
                            .await
                    }
                    Err(e) => Err(e),
                },
                None => self.placement.delete_allocation_for_instance(uuid).await,
            };
            match outcome {
                Ok(()) => {}
                // A claim the request made: nova fails the request on it.
                Err(e) if instance_uuids.contains(uuid) => {
                    warn!(instance = %uuid, error = %e, "could not release the claim");
                    first_error.get_or_insert(ClaimError::AllocationDeleteFailed {
                        consumer_uuid: uuid.clone(),
                        error: e.to_string(),
                    });
                }
                // One it may have made: the request still ends as it would have.
                Err(e) => error!(instance = %uuid, error = %e,
                    "could not take back allocations the request may have written; \
                     the instance may hold a claim no build uses"),
            }
        }
        self.waited.add(asked);
        first_error.map_or(Ok(()), Err)
    }
}

fn caller_gone() -> ClaimError {
    ClaimError::Stopped {
        reason: "the caller's timeout passed before every instance was placed; \
                 the request's claims were released"
            .into(),
    }
}
