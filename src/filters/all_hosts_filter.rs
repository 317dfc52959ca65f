// SPDX-License-Identifier: Apache-2.0
//! `AllHostsFilter`: passes every host.

use super::{FilterRequest, HostFilter};
use crate::model::HostState;

pub struct AllHostsFilter;

impl AllHostsFilter {
    pub const NAME: &'static str = "AllHostsFilter";
}

impl HostFilter for AllHostsFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, _host: &HostState, _req: &FilterRequest<'_>) -> bool {
        true
    }

    fn once_per_request(&self) -> bool {
        true
    }
}
