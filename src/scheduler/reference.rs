// SPDX-License-Identifier: Apache-2.0
//! The reference decision: nova's `_schedule` as nova runs it, every filter and
//! weigher on every candidate for every instance, nothing carried from one
//! instance to the next.
//!
//! The daemon never decides through it. It is the oracle the two production paths
//! are held to: [`Scheduler::schedule`] (instances 2..N re-evaluate only the host
//! the previous instance consumed) in `tests/core/incremental_core.rs`, and
//! [`Scheduler::schedule_table`] (the indexed decision) in `tests/core/indexed_core.rs`,
//! selection, alternates, claims, consumed states and random draws alike; and the
//! baseline `benches/decision_core.rs` measures them against.

use super::{Claimer, ScheduleError, ScheduleOutcome, ScheduleRequest, Scheduler};
use crate::model::HostState;
use rand::Rng;

/// nova's `_schedule` over `hosts`, as nova evaluates it.
pub async fn schedule<C: Claimer, R: Rng + ?Sized>(
    scheduler: &Scheduler,
    hosts: Vec<HostState>,
    req: ScheduleRequest,
    claimer: &mut C,
    rng: &mut R,
) -> Result<ScheduleOutcome, ScheduleError> {
    scheduler
        .schedule_with(hosts, req, claimer, rng, false)
        .await
}
