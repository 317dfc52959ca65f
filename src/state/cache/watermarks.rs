// SPDX-License-Identifier: Apache-2.0
//! Where each incremental pass of a cell reads from: the rows stamped since the
//! previous pass, and the slice of time that has just become old enough for late
//! commits to have landed (see the cache's module doc).

use crate::state::queries::Window;
use chrono::{Duration as ChronoDuration, NaiveDateTime};

/// How late a row may commit after its stamp (and a writer's clock lag behind the
/// database's) and still be seen by an incremental pass.
pub(super) const WATERMARK_MARGIN_SECS: i64 = 5;

/// Where the next incremental pass of a cell reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Watermarks {
    /// The previous read's database clock less a second.
    pub(super) fresh: NaiveDateTime,
    /// Rows stamped up to here were read at least the margin after their stamp.
    pub(super) lagged: NaiveDateTime,
}

impl Watermarks {
    /// After a read of everything at database time `now`.
    pub(super) fn after_full_read(now: NaiveDateTime) -> Self {
        Watermarks {
            fresh: now - ChronoDuration::seconds(1),
            lagged: now - ChronoDuration::seconds(WATERMARK_MARGIN_SECS),
        }
    }

    /// What a pass at database time `now` reads.
    pub(super) fn window(&self, now: NaiveDateTime) -> Window {
        Window {
            fresh: self.fresh,
            lagged_from: self.lagged,
            lagged_to: self.lagged_to(now),
        }
    }

    /// After a pass at database time `now` succeeded.
    pub(super) fn after_pass(&self, now: NaiveDateTime) -> Self {
        Watermarks {
            fresh: now - ChronoDuration::seconds(1),
            lagged: self.lagged_to(now),
        }
    }

    pub(super) fn lagged_to(&self, now: NaiveDateTime) -> NaiveDateTime {
        self.lagged
            .max(now - ChronoDuration::seconds(WATERMARK_MARGIN_SECS))
    }
}
