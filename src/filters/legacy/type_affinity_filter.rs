// SPDX-License-Identifier: Apache-2.0
//! `TypeAffinityFilter` (deprecated in Pike, removed in nova 17.0.0 Queens): "doesn't
//! allow more than one VM type per host". A host passes when none of its instances
//! has an `instance_type_id` other than the requested flavor's `id`, so an empty
//! host always passes (`utils.other_types_on_host`: `host_types - {flavor.id}`).
//!
//! nova's caveat stands: it compares the flavors table's primary key, so a flavor
//! deleted and re-created with the same values counts as another type.
//!
//! Where nova raised (the request's flavor without `id`; an instance object without
//! `instance_type_id`) this filter fails the host. An instance whose flavor is not
//! known here is one an `update_instance_info` cast added without
//! `instance_type_id`; its row's next read gives it.

use crate::filters::{FilterRequest, HostFilter};
use crate::model::HostState;
use tracing::debug;

pub struct TypeAffinityFilter;

impl TypeAffinityFilter {
    pub const NAME: &'static str = "TypeAffinityFilter";
    pub const PATH: &'static str = "nova.scheduler.filters.type_filter.TypeAffinityFilter";

    /// nova logged this from the filter's `__init__` while it was deprecated; the
    /// registry logs it when the chain is built.
    pub fn warn_deprecated() {
        tracing::warn!(
            "TypeAffinityFilter is deprecated for removal in the 17.0.0 Queens release. \
             There is no replacement planned for this filter. It is fundamentally flawed \
             in that it relies on the flavors.id primary key and if a flavor \"changed\" \
             (deleted and re-created with new values) it will result in this filter \
             thinking it is a different flavor, thus breaking the usefulness of this filter."
        );
    }
}

impl HostFilter for TypeAffinityFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        let Some(requested) = req.spec.flavor.id else {
            debug!(host = %host.host, "TypeAffinityFilter: the request's flavor has no id; host fails");
            return false;
        };
        host.instances.iter().all(|uuid| {
            match host.instance_flavor_ids.get(uuid) {
                Some(flavor) => *flavor == Some(requested),
                None => {
                    debug!(host = %host.host, instance = %uuid,
                           "TypeAffinityFilter: flavor of an instance on the host not known; host fails");
                    false
                }
            }
        })
    }

    fn run_on_rebuild(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::legacy::test_support::req;
    use crate::model::{Flavor, RequestSpec};
    use std::sync::Arc;

    fn host(instances: &[(&str, Option<i64>)]) -> HostState {
        HostState {
            host: "fake_host".into(),
            instances: Arc::new(instances.iter().map(|(u, _)| u.to_string()).collect()),
            instance_flavor_ids: Arc::new(
                instances.iter().map(|(u, f)| (u.to_string(), *f)).collect(),
            ),
            ..Default::default()
        }
    }

    fn spec(flavor_id: Option<i64>) -> RequestSpec {
        RequestSpec {
            flavor: Flavor {
                id: flavor_id,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// nova's test_type_filters.TestTypeFilter.test_type_filter (Pike).
    #[test]
    fn nova_test_type_filter_vectors() {
        let f = TypeAffinityFilter;
        let target = 1;
        let s = spec(Some(target));
        // True since no instances on host
        assert!(f.host_passes(&host(&[]), &req(&s)));
        // True since only same instance_type_id on host
        assert!(f.host_passes(&host(&[("instance_1", Some(target))]), &req(&s)));
        // False since host now has an instance of a different type
        assert!(!f.host_passes(
            &host(&[
                ("instance_1", Some(target)),
                ("instance_2", Some(target + 1))
            ]),
            &req(&s)
        ));
    }

    /// nova's test_utils.TestUtils.test_other_types_on_host (Pike).
    #[test]
    fn nova_test_other_types_on_host_vectors() {
        let f = TypeAffinityFilter;
        let h = host(&[("instance", Some(1))]);
        assert!(f.host_passes(&h, &req(&spec(Some(1)))));
        assert!(!f.host_passes(&h, &req(&spec(Some(2)))));
    }

    #[test]
    fn null_unknown_and_missing_ids_fail() {
        let f = TypeAffinityFilter;
        // A NULL instance_type_id is a type (None) other than the flavor's.
        assert!(!f.host_passes(&host(&[("i", None)]), &req(&spec(Some(1)))));
        // An instance whose flavor is not known.
        let mut h = host(&[("i", Some(1))]);
        Arc::make_mut(&mut h.instances).insert("cast-added".into());
        assert!(!f.host_passes(&h, &req(&spec(Some(1)))));
        // nova raised on a flavor without id, even on an empty host.
        assert!(!f.host_passes(&host(&[]), &req(&spec(None))));
        // Flavor ids of instances no longer on the host do not count.
        let mut h = host(&[("i", Some(1))]);
        Arc::make_mut(&mut h.instance_flavor_ids).insert("gone".into(), Some(9));
        assert!(f.host_passes(&h, &req(&spec(Some(1)))));
        assert!(!f.run_on_rebuild());
    }
}
