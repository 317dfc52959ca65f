// SPDX-License-Identifier: Apache-2.0
//! The instances' current allocations, read while the request waits on its
//! allocation candidates.
//!
//! nova's claim is a `GET /allocations/{uuid}` then a `PUT` built on what it read,
//! both after the decision. The `GET` does not depend on the decision, so it is
//! sent once the request filters have run, beside `GET /allocation_candidates`, and the
//! claim sends only its `PUT`. Placement is asked the same questions, in another
//! order. The `PUT` still carries the consumer generation that was read, so
//! allocations that changed in between are refused as they are when they change
//! between nova's `GET` and `PUT` (`AllocationUpdateFailed`); the window is the
//! decision's length longer.

use crate::placement::{CurrentAllocations, PlacementClient};
use rustc_hash::FxHashMap;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::Instrument;

/// The reads of one request's instances, one at a time in the order their claims
/// come (so a claim waits at most for its own read), on a task that stops when
/// the request is done with it.
pub struct AllocationReadAhead {
    reads: FxHashMap<String, oneshot::Receiver<CurrentAllocations>>,
    task: JoinHandle<()>,
}

impl AllocationReadAhead {
    /// Starts reading the allocations of `instance_uuids`, in order.
    pub fn start(
        placement: Arc<PlacementClient>,
        instance_uuids: &[String],
        global_request_id: Option<String>,
    ) -> Self {
        let mut reads = FxHashMap::default();
        let mut senders = Vec::with_capacity(instance_uuids.len());
        for uuid in instance_uuids {
            if reads.contains_key(uuid) {
                continue;
            }
            let (tx, rx) = oneshot::channel();
            reads.insert(uuid.clone(), rx);
            senders.push((uuid.clone(), tx));
        }
        let task = tokio::spawn(
            async move {
                for (uuid, tx) in senders {
                    if tx.is_closed() {
                        continue;
                    }
                    match placement
                        .current_allocations(&uuid, global_request_id.as_deref())
                        .await
                    {
                        Ok(current) => {
                            // The claim may have stopped waiting; nothing to keep then.
                            let _ = tx.send(current);
                        }
                        // The claim reads for itself, and meets the failure there.
                        Err(e) => tracing::debug!(instance = %uuid, error = %e,
                            "reading the instance's allocations ahead failed"),
                    }
                }
            }
            .in_current_span(),
        );
        AllocationReadAhead { reads, task }
    }

    /// What was read for `instance_uuid`, waiting for the read if it is under way;
    /// `None` when it was taken already, never asked for, or failed. A claim that
    /// gets `None` reads for itself, as nova's does.
    pub async fn take(&mut self, instance_uuid: &str) -> Option<CurrentAllocations> {
        let read = self.reads.remove(instance_uuid)?;
        read.await.ok()
    }
}

impl Drop for AllocationReadAhead {
    /// A request that failed or finished early leaves no read behind it.
    fn drop(&mut self) {
        self.task.abort();
    }
}
