// SPDX-License-Identifier: Apache-2.0
//! `AggregateMultiTenancyIsolation`: a host in aggregates with `filter_tenant_id*`
//! metadata only takes the projects listed there. It keeps other tenants out of
//! restricted hosts; it does not confine the listed tenants to them. nova 29 reads
//! the key `filter_tenant_id` only; from nova 30 every key it prefixes
//! ([`Behaviour::TenantKeyPrefix`](crate::release::Behaviour::TenantKeyPrefix)).

use super::utils::aggregate_metadata_get_by_host;
use super::{FilterRequest, HostFilter};
use crate::model::HostState;
use std::collections::BTreeSet;
use tracing::debug;

pub struct AggregateMultiTenancyIsolation {
    /// Every key prefixed with `filter_tenant_id` (nova ≥ 30), else that key only.
    pub tenant_key_prefix: bool,
}

/// nova 34's filter.
impl Default for AggregateMultiTenancyIsolation {
    fn default() -> Self {
        AggregateMultiTenancyIsolation {
            tenant_key_prefix: true,
        }
    }
}

const TENANT_KEY: &str = "filter_tenant_id";

impl AggregateMultiTenancyIsolation {
    pub const NAME: &'static str = "AggregateMultiTenancyIsolation";
}

impl HostFilter for AggregateMultiTenancyIsolation {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        let metadata = aggregate_metadata_get_by_host(host, None);
        // nova ≥ 30: every key that *starts with* filter_tenant_id (filter_tenant_id_gr1, ...).
        let allowed: BTreeSet<&str> = metadata
            .iter()
            .filter(|(k, _)| {
                if self.tenant_key_prefix {
                    k.starts_with(TENANT_KEY)
                } else {
                    k.as_str() == TENANT_KEY
                }
            })
            .flat_map(|(_, v)| v.iter().map(String::as_str))
            .collect();
        if allowed.is_empty() {
            return true;
        }
        // A request without a project (None) is never in the set.
        let passes = req
            .spec
            .project_id
            .as_deref()
            .is_some_and(|p| allowed.contains(p));
        debug!(host = %host.host, project = ?req.spec.project_id, passes,
               "AggregateMultiTenancyIsolation: tenant id on aggregate");
        passes
    }

    fn once_per_request(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Aggregate, RequestSpec};
    use chrono::Utc;
    use std::sync::Arc;

    fn passes(aggs: &[&[(&str, &str)]], project: Option<&str>) -> bool {
        passes_in(AggregateMultiTenancyIsolation::default(), aggs, project)
    }

    fn passes_in(
        filter: AggregateMultiTenancyIsolation,
        aggs: &[&[(&str, &str)]],
        project: Option<&str>,
    ) -> bool {
        let spec = RequestSpec {
            project_id: project.map(str::to_string),
            ..Default::default()
        };
        let req = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        let host = HostState {
            aggregates: aggs
                .iter()
                .map(|md| {
                    Arc::new(Aggregate {
                        metadata: md
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect(),
                        ..Default::default()
                    })
                })
                .collect(),
            ..Default::default()
        };
        filter.host_passes(&host, &req)
    }

    /// nova's test_aggregate_multitenancy_isolation_filters.
    #[test]
    fn nova_vectors() {
        let mine: &[(&str, &str)] = &[("filter_tenant_id", "my_tenantid")];
        assert!(passes(&[mine], Some("my_tenantid")));
        assert!(!passes(
            &[&[("filter_tenant_id", "other")]],
            Some("my_tenantid")
        ));
        assert!(passes(&[], Some("my_tenantid")));
        let groups: &[(&str, &str)] = &[
            ("filter_tenant_id", "my_tenantid"),
            ("filter_tenant_id_gr1", "my_tenantid2,t1, t2"),
            ("filter_tenant_id_gr2", "t5,t4"),
        ];
        assert!(passes(&[groups], Some("my_tenantid")));
        assert!(passes(&[groups], Some("my_tenantid2")));
        assert!(passes(&[groups], Some("t2")));
        assert!(!passes(&[groups], Some("my_tenantid6")));
        // Metadata without tenant keys, or no project at all.
        assert!(passes(&[&[("availability_zone", "az1")]], Some("p")));
        assert!(!passes(&[mine], None));
        // Several aggregates: the union of their tenants.
        assert!(passes(&[mine, &[("filter_tenant_id", "p2")]], Some("p2")));
        assert!(AggregateMultiTenancyIsolation::default().once_per_request());
        assert!(!AggregateMultiTenancyIsolation::default().run_on_rebuild());
    }

    /// nova 29: only the key `filter_tenant_id` restricts a host.
    #[test]
    fn nova_29_reads_the_exact_key_only() {
        let exact = || AggregateMultiTenancyIsolation {
            tenant_key_prefix: false,
        };
        let grouped: &[(&str, &str)] = &[("filter_tenant_id_2", "t2")];
        assert!(passes_in(exact(), &[grouped], Some("someone")));
        assert!(!passes(&[grouped], Some("someone")));
        let both: &[(&str, &str)] = &[("filter_tenant_id", "t1"), ("filter_tenant_id_2", "t2")];
        assert!(passes_in(exact(), &[both], Some("t1")));
        assert!(!passes_in(exact(), &[both], Some("t2")));
        assert!(passes(&[both], Some("t2")));
    }
}
