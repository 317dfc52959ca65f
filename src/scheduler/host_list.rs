// SPDX-License-Identifier: Apache-2.0
//! The hosts of one request as nova holds them: a state per candidate host, every
//! one filtered and weighed for every instance (or, incrementally, only the host the
//! previous instance consumed, for the filters and weighers stable within the
//! request).

use super::decide::{HostSource, Sorted};
use super::{Destination, ScheduleError, ScheduleOutcome, Scheduler};
use crate::filters::Consumed;
use crate::model::{AllocationCandidate, HostState, RequestSpec};
use crate::weighers::WeighCache;
use chrono::{DateTime, Utc};
use rand::Rng;
use std::convert::Infallible;

pub(super) struct HostList<'s> {
    sched: &'s Scheduler,
    hosts: Vec<HostState>,
    /// The last sorted list (every host before the first sort).
    sorted: Vec<usize>,
    now: DateTime<Utc>,
    /// Carry the stable filters' and weighers' results from one sort to the next.
    incremental: bool,
    cache: WeighCache,
    /// What changed since the previous sort (`None`: nothing was sorted yet).
    consumed: Option<Consumed>,
}

impl<'s> HostList<'s> {
    pub(super) fn new(
        sched: &'s Scheduler,
        hosts: Vec<HostState>,
        now: DateTime<Utc>,
        incremental: bool,
    ) -> Self {
        HostList {
            sched,
            sorted: (0..hosts.len()).collect(),
            hosts,
            now,
            incremental,
            cache: WeighCache::default(),
            consumed: None,
        }
    }
}

impl HostSource for HostList<'_> {
    type List = ();
    /// The position in the sorted list.
    type Cursor = usize;
    type Decline = Infallible;

    fn sort<R: Rng + ?Sized>(
        &mut self,
        spec: &RequestSpec,
        index: usize,
        rng: &mut R,
    ) -> Result<Sorted<(), Infallible>, ScheduleError> {
        let after = self.incremental.then_some((&mut self.cache, self.consumed));
        self.sorted = self.sched.sorted_hosts_after(
            &mut self.hosts,
            &self.sorted,
            spec,
            index,
            self.now,
            rng,
            after,
        )?;
        Ok(if self.sorted.is_empty() {
            Sorted::Empty
        } else {
            Sorted::Hosts(())
        })
    }

    fn next_in_list(
        &self,
        _: (),
        same_cell_as: Option<usize>,
        cursor: &mut usize,
    ) -> Option<usize> {
        let cell = same_cell_as.map(|h| &self.hosts[h].cell_uuid);
        while let Some(&i) = self.sorted.get(*cursor) {
            *cursor += 1;
            if cell.is_none_or(|c| *c == self.hosts[i].cell_uuid) {
                return Some(i);
            }
        }
        None
    }

    fn host(&self, host: usize) -> &HostState {
        &self.hosts[host]
    }

    fn first_candidate(&self, host: usize) -> Option<&AllocationCandidate> {
        self.hosts[host].allocation_candidates.first()
    }

    fn consume(&mut self, host: usize, spec: &mut RequestSpec, instance_uuid: Option<&str>) {
        self.sched
            .consume(&mut self.hosts[host], spec, instance_uuid, self.now);
        self.consumed = Some(Consumed {
            consumed: Some(host),
        });
    }

    fn outcome(self, destinations: Vec<Vec<Destination>>, claimed: Vec<String>) -> ScheduleOutcome {
        ScheduleOutcome {
            destinations,
            hosts: self.hosts,
            claimed,
        }
    }
}
