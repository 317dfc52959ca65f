// SPDX-License-Identifier: Apache-2.0
//! `PciPassthroughFilter`: the host must have the devices the instance's PCI
//! requests ask for, for at least one of its Placement allocation candidates.
//!
//! Like nova's (a `CandidateFilterMixin`), it keeps only the allocation candidates
//! whose `mappings` the pools can serve and writes them back to the host; no
//! candidate left fails the host. NUMA affinity is not checked here (nova passes no
//! NUMA cells): that is NUMATopologyFilter's part.

use super::{FilterRequest, HostFilter};
use crate::host_fit;
use crate::model::HostState;
use crate::pci::{request, PciApplyError, ProviderMapping};
use tracing::debug;

pub struct PciPassthroughFilter;

impl PciPassthroughFilter {
    pub const NAME: &'static str = "PciPassthroughFilter";
}

/// What the filter decided for one host.
#[derive(Debug, Clone, PartialEq)]
pub enum PciVerdict {
    /// No PCI requests: pass, candidates untouched.
    NoRequests,
    /// Indices of the allocation candidates that can be served (empty: fail).
    Keep(Vec<usize>),
    /// nova raises here (malformed requests or mappings), which ends the request;
    /// this scheduler fails the host instead.
    Raises(String),
}

/// nova's `host_passes` without the write-back.
pub fn evaluate(host: &HostState, req: &FilterRequest<'_>) -> PciVerdict {
    let requests = match req.spec.pci_requests.as_ref().map(request::from_primitive) {
        None | Some(Ok(None)) => return PciVerdict::NoRequests,
        Some(Ok(Some(r))) if r.is_empty() => return PciVerdict::NoRequests,
        Some(Ok(Some(r))) => r,
        Some(Err(e)) => return PciVerdict::Raises(e.to_string()),
    };
    let stats = host_fit::host_pools(host);
    let mut keep = Vec::new();
    for (i, candidate) in host.allocation_candidates.iter().enumerate() {
        let Some(mapping) = candidate
            .get("mappings")
            .and_then(ProviderMapping::from_json)
        else {
            return PciVerdict::Raises("allocation candidate without a mappings dict".into());
        };
        match stats.support_requests(&requests, Some(&mapping), None) {
            Ok(true) => keep.push(i),
            Ok(false) => {}
            Err(PciApplyError::Raised(e)) => return PciVerdict::Raises(e),
            Err(PciApplyError::Failed) => {}
        }
    }
    PciVerdict::Keep(keep)
}

impl HostFilter for PciPassthroughFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        match evaluate(host, req) {
            PciVerdict::NoRequests => true,
            PciVerdict::Keep(k) => !k.is_empty(),
            PciVerdict::Raises(_) => false,
        }
    }

    fn writes_host(&self) -> bool {
        true
    }

    fn filter_host(&self, host: &mut HostState, req: &FilterRequest<'_>) -> bool {
        match evaluate(host, req) {
            PciVerdict::NoRequests => true,
            PciVerdict::Keep(keep) => {
                let mut i = 0;
                host.allocation_candidates.retain(|_| {
                    i += 1;
                    keep.contains(&(i - 1))
                });
                if keep.is_empty() {
                    debug!(host = %host.host, "host doesn't have the required PCI devices");
                }
                !keep.is_empty()
            }
            PciVerdict::Raises(e) => {
                debug!(host = %host.host, error = %e, "PCI request check raised; host fails");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RequestSpec;
    use chrono::Utc;
    use serde_json::{json, Value};

    fn pci_requests(count: i64, vendor: &str) -> Value {
        json!({"nova_object.name": "InstancePCIRequests", "nova_object.namespace": "nova",
            "nova_object.version": "1.1", "nova_object.data": {"requests": [
            {"nova_object.name": "InstancePCIRequest", "nova_object.namespace": "nova",
             "nova_object.version": "1.4", "nova_object.data": {"count": count,
             "spec": [{"vendor_id": vendor}], "alias_name": "a", "request_id": "r1"}}]}})
    }

    fn host(count: i64, candidates: Vec<Value>) -> HostState {
        HostState {
            pci_stats: Some(std::sync::Arc::new(
                json!([{"vendor_id": "8086", "product_id": "0001", "count": count,
                                    "dev_type": "type-PCI"}]),
            )),
            allocation_candidates: candidates.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    fn run(h: &mut HostState, spec: &RequestSpec) -> bool {
        let req = FilterRequest {
            spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        PciPassthroughFilter.filter_host(h, &req)
    }

    #[test]
    fn no_requests_pass_and_supported_requests_pass() {
        let mut h = host(2, vec![json!({"mappings": {}})]);
        assert!(run(&mut h, &RequestSpec::default()));
        let empty = RequestSpec {
            pci_requests: Some(json!({"nova_object.name": "InstancePCIRequests",
                "nova_object.version": "1.1", "nova_object.data": {"requests": []}})),
            ..Default::default()
        };
        assert!(run(&mut h, &empty));
        let spec = RequestSpec {
            pci_requests: Some(pci_requests(2, "8086")),
            ..Default::default()
        };
        assert!(run(&mut h, &spec));
        let too_many = RequestSpec {
            pci_requests: Some(pci_requests(3, "8086")),
            ..Default::default()
        };
        assert!(!run(&mut h, &too_many));
        assert!(h.allocation_candidates.is_empty());
    }

    #[test]
    fn no_candidates_fail_and_candidates_are_pruned() {
        let spec = RequestSpec {
            pci_requests: Some(pci_requests(1, "8086")),
            ..Default::default()
        };
        assert!(!run(&mut host(2, vec![]), &spec));
        // A candidate whose mapping names an RP the pools lack is dropped; the rest stay.
        let mut h = host(
            2,
            vec![
                json!({"mappings": {"r1-0": ["rp-x"]}, "n": 0}),
                json!({"mappings": {}, "n": 1}),
                json!({"mappings": {"r1-0": ["rp-y"]}, "n": 2}),
            ],
        );
        assert!(run(&mut h, &spec));
        assert_eq!(
            h.allocation_candidates,
            vec![json!({"mappings": {}, "n": 1})]
        );
    }
}
