// SPDX-License-Identifier: Apache-2.0
//! `IsolatedHostsFilter`: keeps `isolated_images` on `isolated_hosts` and, with
//! `restrict_isolated_hosts_to_isolated_images`, other images off them.

use super::{FilterRequest, HostFilter};
use crate::model::HostState;

pub struct IsolatedHostsFilter {
    /// `[filter_scheduler] isolated_images`.
    pub isolated_images: Vec<String>,
    /// `[filter_scheduler] isolated_hosts`.
    pub isolated_hosts: Vec<String>,
    /// `[filter_scheduler] restrict_isolated_hosts_to_isolated_images` (true).
    pub restrict_isolated_hosts_to_isolated_images: bool,
}

impl IsolatedHostsFilter {
    pub const NAME: &'static str = "IsolatedHostsFilter";
}

impl HostFilter for IsolatedHostsFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        let restrict = self.restrict_isolated_hosts_to_isolated_images;
        let host_isolated = self.isolated_hosts.iter().any(|h| *h == *host.host);
        if self.isolated_images.is_empty() {
            // No images to match: isolated hosts take nothing when restrictive.
            return !restrict || !host_isolated;
        }
        // nova's docstring says an empty host list lets everything through; the code
        // does not: with images configured and no hosts, isolated images fail everywhere.
        // Volume-backed requests may have no image id (never isolated then).
        let image_isolated = req
            .spec
            .image
            .as_ref()
            .and_then(|i| i.id.as_deref())
            .is_some_and(|id| self.isolated_images.iter().any(|i| i == id));
        if restrict {
            image_isolated == host_isolated
        } else {
            !image_isolated || host_isolated
        }
    }

    fn run_on_rebuild(&self) -> bool {
        true
    }

    fn once_per_request(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ImageMeta, RequestSpec};
    use chrono::Utc;

    const IMG: &str = "ae7b4a54-1c5b-4bb5-b0e1-4d0ce8e9a7d2";

    fn passes(
        images: &[&str],
        hosts: &[&str],
        restrict: bool,
        host: &str,
        image: Option<&str>,
    ) -> bool {
        let filter = IsolatedHostsFilter {
            isolated_images: images.iter().map(|s| s.to_string()).collect(),
            isolated_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            restrict_isolated_hosts_to_isolated_images: restrict,
        };
        let spec = RequestSpec {
            image: Some(ImageMeta {
                id: image.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        };
        let req = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        let host = HostState {
            host: host.into(),
            ..Default::default()
        };
        filter.host_passes(&host, &req)
    }

    /// nova's test_isolated_hosts_filter.
    #[test]
    fn nova_vectors() {
        let other = Some("other-image");
        let iso = ["isolated_host"];
        // (host isolated, image isolated) with restrict on.
        assert!(passes(&[IMG], &iso, true, "isolated_host", Some(IMG)));
        assert!(!passes(&[IMG], &iso, true, "free_host", Some(IMG)));
        assert!(!passes(&[IMG], &iso, true, "isolated_host", other));
        assert!(passes(&[IMG], &iso, true, "free_host", other));
        // No configuration at all.
        for (h, i) in [("isolated_host", Some(IMG)), ("free_host", other)] {
            assert!(passes(&[], &[], true, h, i));
        }
        // Images only.
        assert!(!passes(&[IMG], &[], true, "any_host", Some(IMG)));
        assert!(passes(&[IMG], &[], true, "any_host", other));
        // Hosts only.
        assert!(!passes(&[], &iso, true, "isolated_host", Some(IMG)));
        assert!(!passes(&[], &iso, true, "isolated_host", other));
        assert!(passes(&[], &iso, true, "free_host", other));
        // restrict off: only a non-isolated host with an isolated image fails.
        assert!(passes(&[IMG], &iso, false, "isolated_host", Some(IMG)));
        assert!(!passes(&[IMG], &iso, false, "free_host", Some(IMG)));
        assert!(passes(&[IMG], &iso, false, "isolated_host", other));
        assert!(passes(&[IMG], &iso, false, "free_host", other));
        assert!(passes(&[], &iso, false, "isolated_host", other));
        // No image id (volume-backed): never an isolated image.
        assert!(passes(&[IMG], &iso, true, "free_host", None));
        assert!(!passes(&[IMG], &iso, true, "isolated_host", None));
        let f = IsolatedHostsFilter {
            isolated_images: vec![],
            isolated_hosts: vec![],
            restrict_isolated_hosts_to_isolated_images: true,
        };
        assert!(f.once_per_request());
        assert!(f.run_on_rebuild());
    }

    #[test]
    fn no_image_at_all() {
        let filter = IsolatedHostsFilter {
            isolated_images: vec![IMG.into()],
            isolated_hosts: vec!["isolated_host".into()],
            restrict_isolated_hosts_to_isolated_images: true,
        };
        let spec = RequestSpec::default();
        let req = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        let host = |h: &str| HostState {
            host: h.into(),
            ..Default::default()
        };
        assert!(filter.host_passes(&host("free_host"), &req));
        assert!(!filter.host_passes(&host("isolated_host"), &req));
    }
}
