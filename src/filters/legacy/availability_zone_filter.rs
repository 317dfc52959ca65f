// SPDX-License-Identifier: Apache-2.0
//! `AvailabilityZoneFilter` (removed in nova 28.0.0 2023.2 Bobcat; last shipped in
//! 2023.1 Antelope, by then superseded by the Placement AZ prefilter): the host's
//! aggregates' `availability_zone` values must contain the requested zone; a host in
//! no zone is in `[DEFAULT] default_availability_zone`. Runs once per request.

use crate::filters::utils::aggregate_metadata_get_by_host;
use crate::filters::{FilterRequest, HostFilter};
use crate::model::HostState;

pub struct AvailabilityZoneFilter {
    /// `[DEFAULT] default_availability_zone` ("nova").
    pub default_availability_zone: String,
}

impl AvailabilityZoneFilter {
    pub const NAME: &'static str = "AvailabilityZoneFilter";
    pub const PATH: &'static str =
        "nova.scheduler.filters.availability_zone_filter.AvailabilityZoneFilter";
}

impl HostFilter for AvailabilityZoneFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn once_per_request(&self) -> bool {
        true
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        let Some(az) = req
            .spec
            .availability_zone
            .as_deref()
            .filter(|z| !z.is_empty())
        else {
            return true;
        };
        let metadata = aggregate_metadata_get_by_host(host, Some("availability_zone"));
        match metadata.get("availability_zone") {
            Some(zones) => zones.contains(az),
            None => az == self.default_availability_zone,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::legacy::test_support::{req, with_aggregate_metadata};
    use crate::model::RequestSpec;

    fn spec(az: Option<&str>) -> RequestSpec {
        RequestSpec {
            availability_zone: az.map(str::to_string),
            ..Default::default()
        }
    }

    fn host(zones: &[&str]) -> HostState {
        let h = HostState {
            host: "host1".into(),
            ..Default::default()
        };
        with_aggregate_metadata(h, "availability_zone", zones)
    }

    #[test]
    fn nova_test_availability_zone_filter_vectors() {
        let f = AvailabilityZoneFilter {
            default_availability_zone: "nova".into(),
        };
        assert!(f.once_per_request());
        assert!(f.host_passes(&host(&["nova"]), &req(&spec(Some("nova")))));
        assert!(!f.host_passes(&host(&["nova"]), &req(&spec(Some("other")))));
        // No zone requested: any host.
        assert!(f.host_passes(&host(&["az1"]), &req(&spec(None))));
        assert!(f.host_passes(&host(&["az1"]), &req(&spec(Some("")))));
        // Several zones on one aggregate value are split on commas and stripped.
        assert!(f.host_passes(&host(&["az1, az2"]), &req(&spec(Some("az2")))));
        // A host in no zone is in the default zone.
        assert!(f.host_passes(&host(&[]), &req(&spec(Some("nova")))));
        assert!(!f.host_passes(&host(&[]), &req(&spec(Some("az1")))));
    }
}
