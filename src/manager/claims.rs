// SPDX-License-Identifier: Apache-2.0
//! The core's [`Claimer`] over Placement, with nova's rules: a consumer-generation
//! conflict fails the request; any other failure to claim moves on to the next host.

use super::read_ahead::AllocationReadAhead;
use super::ClaimTime;
use crate::model::HostState;
use crate::placement::index::LiveIndex;
use crate::placement::{PlacementClient, PlacementError};
use crate::scheduler::{ClaimError, Claimer};
use serde_json::Value;
use std::time::Instant;
use tracing::warn;

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
        }
    }

    /// Claims build on the allocations `read_ahead` read instead of reading them.
    pub fn with_read_ahead(mut self, read_ahead: Option<AllocationReadAhead>) -> Self {
        self.read_ahead = read_ahead;
        self
    }
}

impl Claimer for PlacementClaims<'_> {
    async fn claim(
        &mut self,
        instance_uuid: &str,
        host: &HostState,
        allocation_request: &Value,
    ) -> Result<bool, ClaimError> {
        let asked = Instant::now();
        let current = match self.read_ahead.as_mut() {
            Some(read_ahead) => read_ahead.take(instance_uuid).await,
            None => None,
        };
        let claimed = self
            .placement
            .claim_resources_from(
                instance_uuid,
                allocation_request,
                &self.project_id,
                &self.user_id,
                self.global_request_id.as_deref(),
                current,
            )
            .await;
        self.waited.add(asked);
        match claimed {
            Ok(true) => {
                if let Some(index) = self.index {
                    index.apply_claim(allocation_request);
                }
                Ok(true)
            }
            Ok(false) => {
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
                warn!(host = %host.host, instance = instance_uuid, error = %e, "claim failed; trying the next host");
                Ok(false)
            }
        }
    }

    /// Deletes every claim of the request; keeps going past a failure so no claim is
    /// left behind, then reports the first failure as nova's `AllocationDeleteFailed`.
    async fn release(&mut self, instance_uuids: &[String]) -> Result<(), ClaimError> {
        let asked = Instant::now();
        let mut first_error = None;
        for uuid in instance_uuids {
            if let Err(e) = self.placement.delete_allocation_for_instance(uuid).await {
                warn!(instance = %uuid, error = %e, "could not release the claim");
                first_error.get_or_insert(ClaimError::AllocationDeleteFailed {
                    consumer_uuid: uuid.clone(),
                    error: e.to_string(),
                });
            }
        }
        self.waited.add(asked);
        first_error.map_or(Ok(()), Err)
    }
}
