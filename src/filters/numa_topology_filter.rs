// SPDX-License-Identifier: Apache-2.0
//! `NUMATopologyFilter`: the request's NUMA topology must fit the host's
//! (`hardware.numa_fit_instance_to_host`), for at least one of the host's
//! Placement allocation candidates. As nova does, the surviving candidates are
//! written back to the host, and a passing host gets `limits['numa_topology']`
//! (the ratios, plus the request's network metadata) for consumption and compute.
//!
//! Requests with PCI devices: as nova, host cells with devices are tried first and
//! a permutation of cells is taken only if `PciDeviceStats.support_requests` accepts
//! the requests on those cells (the requests' `numa_policy`: required, legacy,
//! preferred, socket) under the candidate's provider mapping.

use super::{FilterRequest, HostFilter};
use crate::host_fit;
use crate::model::{HostState, RequestSpec};
use crate::numa::fit::PciSupportCheck;
use crate::numa::{
    numa_fit_instance_to_host, InstanceCell, InstanceTopology, Limits, NetworkMetadata, NumaError,
    NumaTopology, PciContext,
};
use crate::pci::{self, ProviderMapping};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use tracing::{debug, warn};

pub struct NUMATopologyFilter {
    /// `[compute] packing_host_numa_cells_allocation_strategy` (false).
    pub pack: bool,
    /// The last request topology decoded, keyed by its primitive: the filter runs
    /// once per host with the same request.
    parsed: Mutex<Option<(Value, Arc<InstanceTopology>)>>,
}

impl NUMATopologyFilter {
    pub const NAME: &'static str = "NUMATopologyFilter";

    pub fn new(pack: bool) -> Self {
        NUMATopologyFilter {
            pack,
            parsed: Mutex::new(None),
        }
    }

    fn request_topology(&self, raw: &Value) -> Result<Arc<InstanceTopology>, NumaError> {
        let mut cache = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((key, topo)) = cache.as_ref() {
            if key == raw {
                return Ok(topo.clone());
            }
        }
        let topo = Arc::new(InstanceTopology::from_primitive(raw)?);
        *cache = Some((raw.clone(), topo.clone()));
        Ok(topo)
    }

    /// The decision and what a pass writes to the host.
    fn evaluate(&self, host: &HostState, req: &FilterRequest<'_>) -> Verdict {
        let spec = req.spec;
        let Some(image) = spec.image.as_ref() else {
            // nova reads `spec_obj.image.properties` unconditionally (and raises).
            warn!(host = %host.host, "NUMATopologyFilter: request has no image; host fails");
            return Verdict::fail();
        };
        let host_topology = match host.numa.get(host.numa_topology.as_deref()) {
            Ok(t) => t.filter(|t| t.is_truthy()),
            Err(e) => {
                warn!(host = %host.host, node = %host.nodename, error = %e,
                      "NUMATopologyFilter: cannot read the host NUMA topology; host fails");
                return Verdict::fail();
            }
        };
        if let Some(t) = &host_topology {
            if !satisfies_cpu_policy(t, spec, &image.properties) {
                debug!(host = %host.host, "fails CPU policy requirements. Host does not have \
                       hyperthreading or hyperthreading is disabled, but 'require' threads \
                       policy was requested.");
                return Verdict::fail();
            }
        }
        let requested = match spec.numa_topology.as_ref() {
            None => None,
            Some(raw) => match self.request_topology(raw) {
                Ok(t) => Some(t).filter(|t| t.is_truthy()),
                Err(e) => {
                    warn!(error = %e, "NUMATopologyFilter: cannot read the request NUMA topology; host fails");
                    return Verdict::fail();
                }
            },
        };
        let Some(requested) = requested else {
            return Verdict::pass();
        };
        let Some(host_topology) = host_topology else {
            debug!(host = %host.host, node = %host.nodename,
                   "fails NUMA topology requirements. No host NUMA topology while the instance specified one.");
            return Verdict::fail();
        };
        let pci_requests = match host_fit::spec_requests(spec) {
            Ok(r) => r,
            Err(e) => {
                warn!(error = %e, "NUMATopologyFilter: cannot read the request PCI requests; host fails");
                return Verdict::fail();
            }
        };
        let network_metadata = match spec.network_metadata.as_ref() {
            None => None,
            Some(raw) => match NetworkMetadata::from_primitive(raw) {
                Ok(nm) => Some(nm),
                Err(e) => {
                    warn!(error = %e, "NUMATopologyFilter: cannot read the request network metadata; host fails");
                    return Verdict::fail();
                }
            },
        };
        let limits = Limits {
            cpu_allocation_ratio: host.cpu_allocation_ratio,
            ram_allocation_ratio: host.ram_allocation_ratio,
            network_metadata,
        };
        let stats = host_fit::host_pools(host);
        let pools = stats.numa_counts();
        // nova clones the spec once per host; every candidate sees that clone as the
        // previous candidate's fit left it.
        let mut topology = (*requested).clone();
        let mut keep = Vec::with_capacity(host.allocation_candidates.len());
        for candidate in &host.allocation_candidates {
            // nova evaluates `candidate["mappings"]` for every candidate (KeyError
            // without one); only the PCI check reads what is in it.
            let Some(raw_mapping) = candidate.get("mappings") else {
                warn!(host = %host.host, "NUMATopologyFilter: allocation candidate without mappings; host fails");
                return Verdict::fail();
            };
            let mapping = match &pci_requests {
                None => None,
                Some(_) => match ProviderMapping::from_json(raw_mapping) {
                    Some(m) => Some(m),
                    None => {
                        warn!(host = %host.host, "NUMATopologyFilter: allocation candidate mappings is not a dict of lists; host fails");
                        return Verdict::fail();
                    }
                },
            };
            let numa_pci = pci_requests.as_deref().map(|requests| {
                pci::NumaPciCheck::new(&stats, requests, mapping.as_ref(), &host_topology)
            });
            let check =
                |cells: &[InstanceCell]| numa_pci.as_ref().map_or(Ok(true), |c| c.check(cells));
            let pci = PciContext {
                pools: Some(&pools),
                support_requests: numa_pci.is_some().then_some(&check as PciSupportCheck<'_>),
            };
            match fit(&host_topology, &mut topology, &limits, self.pack, &pci) {
                Ok(fits) => keep.push(fits),
                Err(e) => {
                    warn!(host = %host.host, error = %e, "NUMATopologyFilter: NUMA fit failed; host fails");
                    return Verdict::fail();
                }
            }
        }
        if !keep.iter().any(|&k| k) {
            debug!(host = %host.host, node = %host.nodename,
                   "fails NUMA topology requirements. The instance does not fit on this host.");
            return Verdict {
                passes: false,
                keep: Some(keep),
                limits: None,
            };
        }
        Verdict {
            passes: true,
            keep: Some(keep),
            limits: Some(limits.to_primitive()),
        }
    }
}

fn fit(
    host: &NumaTopology,
    inst: &mut InstanceTopology,
    limits: &Limits,
    pack: bool,
    pci: &PciContext<'_>,
) -> Result<bool, NumaError> {
    Ok(numa_fit_instance_to_host(host, inst, Some(limits), pack, pci)?.is_some())
}

/// `_satisfies_cpu_policy`: `dedicated` + `require` (from the flavor or the image)
/// needs a host with SMT siblings.
fn satisfies_cpu_policy(
    host: &NumaTopology,
    spec: &RequestSpec,
    image_props: &serde_json::Map<String, Value>,
) -> bool {
    let extra = |k: &str| spec.flavor.extra_specs.get(k).map(String::as_str);
    let prop = |k: &str| image_props.get(k).and_then(Value::as_str);
    let dedicated =
        extra("hw:cpu_policy") == Some("dedicated") || prop("hw_cpu_policy") == Some("dedicated");
    let require = extra("hw:cpu_thread_policy") == Some("require")
        || prop("hw_cpu_thread_policy") == Some("require");
    !(dedicated && require) || host.has_threads()
}

struct Verdict {
    passes: bool,
    /// Per allocation candidate: still viable (written back when present).
    keep: Option<Vec<bool>>,
    limits: Option<Value>,
}

impl Verdict {
    fn pass() -> Self {
        Verdict {
            passes: true,
            keep: None,
            limits: None,
        }
    }
    fn fail() -> Self {
        Verdict {
            passes: false,
            keep: None,
            limits: None,
        }
    }
}

impl HostFilter for NUMATopologyFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        self.evaluate(host, req).passes
    }

    fn writes_host(&self) -> bool {
        true
    }

    fn filter_host(&self, host: &mut HostState, req: &FilterRequest<'_>) -> bool {
        let verdict = self.evaluate(host, req);
        if let Some(keep) = verdict.keep {
            let mut flags = keep.into_iter();
            host.allocation_candidates
                .retain(|_| flags.next().unwrap_or(false));
        }
        if let Some(limits) = verdict.limits {
            host.limits.insert("numa_topology".into(), limits);
        }
        verdict.passes
    }
    // RUN_ON_REBUILD = False: the API refuses rebuilds that change the NUMA constraints.
}

#[cfg(test)]
mod tests;
