// SPDX-License-Identifier: Apache-2.0
//! Batched claims for requests answered by the Placement fast path: the decision
//! records each instance's allocation request in the provider index (tentatively,
//! so the request's next instances and concurrent requests see it), and one
//! `POST /allocations` then claims them all in Placement, all or nothing.
//!
//! Placement stays the authority: the index only decides which claims are worth
//! sending; a stale index turns into a refused POST (nothing written), never into
//! an overcommit. The caller re-runs the decision on a refreshed index then.

use crate::model::HostState;
use crate::placement::index::{LiveIndex, Tentative};
use crate::placement::{BatchClaim, PlacementClient, PlacementError};
use crate::scheduler::{ClaimError, Claimer};
use serde_json::Value;
use tracing::debug;

/// Why a batch was not committed (in every case nothing stays claimed).
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// Placement refused the batch (capacity, provider generation, provider gone)
    /// or could not be reached: worth a new decision on a refreshed index.
    #[error("Placement refused the batched claim: {0}")]
    Refused(String),
    /// A consumer generation conflict: nova's `AllocationUpdateFailed`, which fails
    /// the request.
    #[error(transparent)]
    Consumer(ClaimError),
    /// Placement does not serve the microversion: claim per instance instead.
    #[error("Placement does not serve POST /allocations at the claim microversion")]
    Unsupported,
}

/// One instance's claim, recorded in the index and not yet in Placement.
struct Pending {
    instance_uuid: String,
    allocation_request: Value,
    tentative: Tentative,
}

/// The core's [`Claimer`] for one decision of a batched request. Claims that were
/// not committed are taken back out of the index when it is dropped (a failed
/// decision, an early error, a refused POST).
pub struct BatchClaims<'a> {
    index: &'a LiveIndex,
    pending: Vec<Pending>,
    /// When the caller stops waiting: the decision stops there.
    deadline: Option<std::time::Instant>,
}

impl<'a> BatchClaims<'a> {
    pub fn new(index: &'a LiveIndex, deadline: Option<std::time::Instant>) -> Self {
        BatchClaims {
            index,
            pending: Vec::new(),
            deadline,
        }
    }

    /// Claims every recorded instance with one `POST /allocations`. On success the
    /// claims stay in the index (as a per-instance claim does until the next
    /// refresh reads Placement's usages); on any failure they are taken out.
    ///
    /// No lock is held during the POST: the index lock is only taken, briefly, by
    /// [`LiveIndex::try_claim`] / [`LiveIndex::revert`].
    pub async fn commit(
        mut self,
        placement: &PlacementClient,
        project_id: &str,
        user_id: &str,
        global_request_id: Option<&str>,
    ) -> Result<(), CommitError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let claims: Vec<(String, &Value)> = self
            .pending
            .iter()
            .map(|p| (p.instance_uuid.clone(), &p.allocation_request))
            .collect();
        let answer = placement
            .claim_batch(&claims, project_id, user_id, global_request_id)
            .await;
        // Whatever happened, `self` is dropped below: a failure reverts the claims.
        match answer {
            Ok(BatchClaim::Claimed) => {
                debug!(instances = self.pending.len(), "batched claim accepted");
                self.pending.clear();
                Ok(())
            }
            Ok(BatchClaim::Refused(reason)) => Err(CommitError::Refused(reason)),
            Ok(BatchClaim::Unsupported) => Err(CommitError::Unsupported),
            Err(PlacementError::AllocationUpdateFailed {
                consumer_uuid,
                error,
            }) => Err(CommitError::Consumer(ClaimError::AllocationUpdateFailed {
                consumer_uuid,
                error,
            })),
            // Unreachable, keystone, a body we cannot read: as nova's `@safe_connect`
            // makes a claim that could not be sent a failed claim.
            Err(e) => Err(CommitError::Refused(e.to_string())),
        }
    }

    fn revert_where(&mut self, mut drop_it: impl FnMut(&Pending) -> bool) {
        let index = self.index;
        self.pending.retain(|p| {
            if drop_it(p) {
                index.revert(&p.tentative);
                false
            } else {
                true
            }
        });
    }
}

impl Drop for BatchClaims<'_> {
    fn drop(&mut self) {
        self.revert_where(|_| true);
    }
}

impl Claimer for BatchClaims<'_> {
    /// A claim the index says Placement would accept is recorded and counted as
    /// made; one it says Placement would refuse moves on to the next host, as a
    /// refused `PUT` does.
    async fn claim(
        &mut self,
        instance_uuid: &str,
        host: &HostState,
        allocation_request: &Value,
    ) -> Result<bool, ClaimError> {
        match self.index.try_claim(allocation_request) {
            Some(tentative) => {
                self.pending.push(Pending {
                    instance_uuid: instance_uuid.to_string(),
                    allocation_request: allocation_request.clone(),
                    tentative,
                });
                Ok(true)
            }
            None => {
                debug!(host = %host.host, instance = instance_uuid,
                    "no room left in the provider index; trying the next host");
                Ok(false)
            }
        }
    }

    /// Nothing is in Placement yet: releasing only takes the claims out of the index.
    async fn release(&mut self, instance_uuids: &[String]) -> Result<(), ClaimError> {
        self.revert_where(|p| instance_uuids.contains(&p.instance_uuid));
        Ok(())
    }

    /// Lets other requests run between instances; stops once the caller has gone.
    async fn before_instance(&mut self) -> Result<(), ClaimError> {
        tokio::task::yield_now().await;
        if self
            .deadline
            .is_some_and(|d| std::time::Instant::now() >= d)
        {
            return Err(ClaimError::Stopped {
                reason: "the caller's timeout passed before every instance was placed".into(),
            });
        }
        Ok(())
    }
}
