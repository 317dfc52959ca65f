// SPDX-License-Identifier: Apache-2.0
//! An operator's nova filter and weigher classes, run unchanged in an embedded CPython
//! (PyO3).
//!
//! The interpreter is the libpython this binary links; it takes the packages of the
//! environment nova is installed in (`[nova_scheduler_rs] python`, else the
//! interpreter of `nova-scheduler` on `PATH`): that interpreter's site directories
//! are added, `.pth` files included, and it must be the same Python version. The
//! nova side lives in `python/bridge.py`, compiled into the binary: nova's loader
//! finds the classes, nova.conf is read by oslo.config as nova reads it, and each
//! filter gets nova's own `HostState` objects and `RequestSpec` and is called
//! through its `filter_all`, as nova's filter handler calls it; each weigher through
//! `weigh_objects`, its `minval`/`maxval` and `weight_multiplier`, as nova's weight
//! handler calls them.
//!
//! One GIL hold per class per request, never one per host. The host states cross
//! as JSON, one text per host; the interpreter rebuilds a host's object only when
//! its text changed since the host was last asked for, so a warm cloud costs one
//! comparison per host.
//!
//! Not carried to Python yet: a host's NUMA topology and PCI pools as consumed by
//! the request's earlier instances (the compute's report is), and what a filter
//! writes to a host state (a pruned `allocation_candidates`, `limits`).

use super::{interned, PluginError, PythonSetup};
use crate::filters::{CustomFilters, FilterRequest, HostFilter};
use crate::model::{HostState, RequestSpec};
use crate::weighers::aggregate_multiplier::MultiplierSetting;
use crate::weighers::{AllWeights, CustomWeighers, HostWeigher, WeighError};
use pyo3::prelude::*;
use pyo3::types::PyModule;
use serde_json::{json, Value};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use tracing::{info, warn};

/// The nova side, run as module `nova_scheduler_rs_bridge`.
const BRIDGE: &str = include_str!("python/bridge.py");

/// Asks the environment's own interpreter for its version, its site directories
/// and the rest of its path that is not its standard library (`PYTHONPATH`, what
/// `.pth` files add).
const PROBE: &str = "import json, site, sys\n\
sites = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])\n\
std = [p for p in sys.path if p.startswith(sys.base_prefix) and p not in sites]\n\
print(json.dumps({'version': list(sys.version_info[:2]), 'site': sites, \
'path': [p for p in sys.path if p and p not in std]}))";

/// The process's one interpreter, started on first use.
struct Interpreter {
    bridge: Py<PyModule>,
}

static INTERPRETER: OnceLock<Result<Arc<Interpreter>, PluginError>> = OnceLock::new();

fn interpreter(setup: &PythonSetup) -> Result<Arc<Interpreter>, PluginError> {
    INTERPRETER
        .get_or_init(|| Interpreter::start(setup).map(Arc::new))
        .clone()
}

#[derive(serde::Deserialize)]
struct Probe {
    version: (u8, u8),
    site: Vec<PathBuf>,
    path: Vec<PathBuf>,
}

impl Interpreter {
    fn start(setup: &PythonSetup) -> Result<Interpreter, PluginError> {
        let path = setup.interpreter()?;
        let probe = probe(&path)?;
        Python::initialize();
        Python::attach(|py| {
            let embedded = py.version_info();
            if (embedded.major, embedded.minor) != probe.version {
                return Err(PluginError::Interpreter(format!(
                    "{} is Python {}.{}, and this daemon embeds Python {}.{}: name an \
                     environment of Python {}.{} in [nova_scheduler_rs] python",
                    path.display(),
                    probe.version.0,
                    probe.version.1,
                    embedded.major,
                    embedded.minor,
                    embedded.major,
                    embedded.minor
                )));
            }
            let raised = |e: PyErr| PluginError::Raised(described(py, &e));
            let sys = py.import("sys").map_err(raised)?;
            sys.setattr("argv", vec!["nova-scheduler"])
                .map_err(raised)?;
            let site = py.import("site").map_err(raised)?;
            for dir in probe.site.iter().filter(|d| d.is_dir()) {
                site.call_method1("addsitedir", (text(dir),))
                    .map_err(raised)?;
            }
            let sys_path = sys.getattr("path").map_err(raised)?;
            for dir in &probe.path {
                if !sys_path.contains(text(dir)).map_err(raised)? {
                    sys_path
                        .call_method1("append", (text(dir),))
                        .map_err(raised)?;
                }
            }
            let code = CString::new(BRIDGE).map_err(|e| PluginError::Raised(e.to_string()))?;
            let bridge = PyModule::from_code(
                py,
                &code,
                c"nova_scheduler_rs/bridge.py",
                c"nova_scheduler_rs_bridge",
            )
            .map_err(raised)?;
            let files: Vec<String> = setup.config_files.iter().map(|p| text(p)).collect();
            let dirs: Vec<String> = setup.config_dirs.iter().map(|p| text(p)).collect();
            let version: String = bridge
                .call_method1("start", (files, dirs))
                .and_then(|v| v.extract())
                .map_err(raised)?;
            info!(
                interpreter = %path.display(),
                "embedded Python {version} started for the operator's filter classes, \
                 with the packages of {}",
                path.display()
            );
            Ok(Interpreter {
                bridge: bridge.unbind(),
            })
        })
    }
}

fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn probe(path: &Path) -> Result<Probe, PluginError> {
    let out = std::process::Command::new(path)
        .args(["-c", PROBE])
        .output()
        .map_err(|e| PluginError::Interpreter(format!("{}: {e}", path.display())))?;
    if !out.status.success() {
        return Err(PluginError::Interpreter(format!(
            "{} -c …: {}: {}",
            path.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| {
        PluginError::Interpreter(format!("{}: unexpected answer: {e}", path.display()))
    })
}

/// A Python exception as Python prints it, with its traceback.
fn described(py: Python<'_>, e: &PyErr) -> String {
    let traceback = e
        .traceback(py)
        .and_then(|tb| tb.format().ok())
        .unwrap_or_default();
    format!("{traceback}{e}")
}

/// The classes the operator's `available_filters` entries load.
pub struct PythonFilterClasses {
    interpreter: Arc<Interpreter>,
    entries: Vec<String>,
    names: Vec<String>,
}

impl PythonFilterClasses {
    /// Loads `entries` (the `available_filters` entries that are not nova's) with
    /// nova's own loader, starting the interpreter if this process has none yet.
    pub fn load(entries: Vec<String>, setup: &PythonSetup) -> Result<Self, PluginError> {
        let interpreter = interpreter(setup)?;
        let classes: Vec<(String, String, bool, bool)> = Python::attach(|py| {
            interpreter
                .bridge
                .bind(py)
                .call_method1("load_filters", (entries.clone(),))
                .and_then(|v| v.extract())
                .map_err(|e| {
                    PluginError::Raised(format!(
                        "[filter_scheduler] available_filters: {}",
                        described(py, &e)
                    ))
                })
        })?;
        for (name, path, once, on_rebuild) in &classes {
            info!(
                class = %path,
                run_filter_once_per_request = once,
                RUN_ON_REBUILD = on_rebuild,
                "filter class {name} loaded from [filter_scheduler] available_filters"
            );
        }
        Ok(PythonFilterClasses {
            interpreter,
            entries,
            names: classes.into_iter().map(|(name, ..)| name).collect(),
        })
    }
}

impl CustomFilters for PythonFilterClasses {
    fn names(&self) -> Vec<String> {
        self.names.clone()
    }

    fn build(&self, name: &str) -> Option<Result<Box<dyn HostFilter>, String>> {
        if !self.names.iter().any(|n| n == name) {
            return None;
        }
        let made = Python::attach(|py| {
            self.interpreter
                .bridge
                .bind(py)
                .call_method1("new_filter", (self.entries.clone(), name))
                .map(Bound::unbind)
                .map_err(|e| format!("filter class {name}: {}", described(py, &e)))
        });
        Some(made.map(|instance| {
            Box::new(PythonFilter {
                name: interned(name),
                instance,
                interpreter: Arc::clone(&self.interpreter),
            }) as Box<dyn HostFilter>
        }))
    }
}

impl PythonFilterClasses {
    /// nova-scheduler's own filter handler with the class `name`, over nova's
    /// `HostState`s of `hosts` and the request of `req`, built here once: what
    /// running the class costs nova, for comparing with what it costs in the
    /// chain (`benches/decision_core.rs`).
    pub fn novas_handler(
        &self,
        name: &str,
        hosts: &[&HostState],
        req: &FilterRequest<'_>,
    ) -> Result<NovasFilterHandler, String> {
        let spec = req
            .spec
            .primitive
            .as_deref()
            .ok_or("the request carries no primitive")?;
        let texts = host_texts(hosts);
        let changes = spec_changes(req.spec).to_string();
        Python::attach(|py| {
            let bridge = self.interpreter.bridge.bind(py);
            let prepared = || -> PyResult<NovasFilterHandler> {
                Ok(NovasFilterHandler {
                    filter: bridge
                        .call_method1("new_filter", (self.entries.clone(), name))?
                        .unbind(),
                    states: bridge.call_method1("host_states", (texts,))?.unbind(),
                    spec: bridge
                        .call_method1("request_spec", (spec, changes))?
                        .unbind(),
                    index: req.index,
                    interpreter: Arc::clone(&self.interpreter),
                })
            };
            prepared().map_err(|e| described(py, &e))
        })
    }
}

/// One class in nova's filter handler over host states nova already holds
/// (see [`PythonFilterClasses::novas_handler`]).
pub struct NovasFilterHandler {
    filter: Py<PyAny>,
    states: Py<PyAny>,
    spec: Py<PyAny>,
    index: usize,
    interpreter: Arc<Interpreter>,
}

impl NovasFilterHandler {
    /// One run of nova's handler: the hosts it leaves.
    pub fn run(&self) -> Result<usize, String> {
        Python::attach(|py| {
            self.interpreter
                .bridge
                .bind(py)
                .call_method1(
                    "novas_filter_handler",
                    (
                        self.filter.bind(py),
                        self.states.bind(py),
                        self.spec.bind(py),
                        self.index,
                    ),
                )
                .and_then(|left| left.extract())
                .map_err(|e| described(py, &e))
        })
    }
}

/// One instance of an operator's filter class, in the chain.
pub struct PythonFilter {
    name: &'static str,
    instance: Py<PyAny>,
    interpreter: Arc<Interpreter>,
}

impl HostFilter for PythonFilter {
    fn name(&self) -> &'static str {
        self.name
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        self.verdicts(&[host], req)
            .first()
            .copied()
            .unwrap_or(false)
    }

    /// nova's own `_filter_one` (in Python) skips the class on a rebuild unless
    /// its `RUN_ON_REBUILD` says otherwise.
    fn run_on_rebuild(&self) -> bool {
        true
    }

    /// What the class does to a host state is its own: the decision index, which
    /// shares host states between requests, never serves a request it filters.
    fn writes_host(&self) -> bool {
        true
    }

    fn filters_all_at_once(&self) -> bool {
        true
    }

    fn filter_all(&self, hosts: &[&HostState], req: &FilterRequest<'_>) -> Vec<bool> {
        self.verdicts(hosts, req)
    }
}

impl PythonFilter {
    /// nova's filter handler for this class over `hosts`: every host passes when
    /// its `run_filter_for_index` skips this instance; none when it raises (the
    /// exception and its traceback are logged).
    fn verdicts(&self, hosts: &[&HostState], req: &FilterRequest<'_>) -> Vec<bool> {
        let Some(spec) = req.spec.primitive.as_deref() else {
            warn!(
                filter = self.name,
                "no request object for the Python filter {} (this request was not \
                 received over RPC); no host passes it",
                self.name
            );
            return vec![false; hosts.len()];
        };
        let texts = host_texts(hosts);
        let changes = spec_changes(req.spec).to_string();
        let result = Python::attach(|py| {
            let bridge = self.interpreter.bridge.bind(py);
            let run = || -> PyResult<Option<Vec<bool>>> {
                let states = bridge.call_method1("host_states", (texts,))?;
                let spec = bridge.call_method1("request_spec", (spec, changes))?;
                let verdicts = bridge.call_method1(
                    "filter_all",
                    (self.instance.bind(py), states, spec, req.index),
                )?;
                verdicts.extract()
            };
            run().map_err(|e| {
                let class = e.get_type(py);
                let raised = crate::filters::FilterRaised {
                    class: class
                        .name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|_| "Exception".into()),
                    module: class
                        .module()
                        .map(|m| m.to_string_lossy().into_owned())
                        .unwrap_or_else(|_| "builtins".into()),
                    message: e
                        .value(py)
                        .str()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                };
                (raised, described(py, &e))
            })
        });
        match result {
            Ok(Some(verdicts)) if verdicts.len() == hosts.len() => verdicts,
            Ok(Some(verdicts)) => {
                warn!(
                    filter = self.name,
                    "the Python filter {} answered {} verdicts for {} hosts; no host passes it",
                    self.name,
                    verdicts.len(),
                    hosts.len()
                );
                vec![false; hosts.len()]
            }
            Ok(None) => vec![true; hosts.len()],
            Err((raised, described)) => {
                warn!(
                    filter = self.name,
                    "the Python filter {} raised; the request fails with its exception: {described}",
                    self.name
                );
                crate::filters::raise(raised);
                vec![false; hosts.len()]
            }
        }
    }
}

/// The hosts as the interpreter's `host_states` takes them.
fn host_texts<'h>(hosts: &[&'h HostState]) -> Vec<((&'h str, &'h str), String)> {
    hosts
        .iter()
        .map(|h| ((&*h.host, &*h.nodename), host_json(h).to_string()))
        .collect()
}

/// The weigher classes the operator's `weight_classes` entries load.
pub struct PythonWeigherClasses {
    interpreter: Arc<Interpreter>,
    entries: Vec<String>,
}

impl PythonWeigherClasses {
    /// For `entries` (the `weight_classes` entries that are not nova's), starting
    /// the interpreter if this process has none yet; each is loaded when the
    /// pipeline is built.
    pub fn new(entries: Vec<String>, setup: &PythonSetup) -> Result<Self, PluginError> {
        Ok(PythonWeigherClasses {
            interpreter: interpreter(setup)?,
            entries,
        })
    }
}

impl CustomWeighers for PythonWeigherClasses {
    fn build(&self, entry: &str) -> Option<Result<Vec<Box<dyn HostWeigher>>, String>> {
        if !self.entries.iter().any(|e| e == entry) {
            return None;
        }
        let made = Python::attach(|py| {
            let built: Vec<(String, Py<PyAny>)> = self
                .interpreter
                .bridge
                .bind(py)
                .call_method1("new_weighers", (entry,))
                .and_then(|v| v.extract())
                .map_err(|e| {
                    format!(
                        "[filter_scheduler] weight_classes {entry}: {}",
                        described(py, &e)
                    )
                })?;
            Ok(built
                .into_iter()
                .map(|(name, instance)| {
                    info!(
                        entry,
                        "weigher class {name} loaded from [filter_scheduler] weight_classes"
                    );
                    Box::new(PythonWeigher {
                        name: interned(&name),
                        instance,
                        interpreter: Arc::clone(&self.interpreter),
                    }) as Box<dyn HostWeigher>
                })
                .collect())
        });
        Some(made)
    }
}

/// What `bridge.weigh_all` answers: raw weights, minval, maxval, multipliers.
type HandlerWeights = (Vec<f64>, Option<f64>, Option<f64>, Vec<f64>);

/// One instance of an operator's weigher class, in the pipeline.
pub struct PythonWeigher {
    name: &'static str,
    instance: Py<PyAny>,
    interpreter: Arc<Interpreter>,
}

impl HostWeigher for PythonWeigher {
    fn name(&self) -> &'static str {
        self.name
    }

    fn weigh(&self, host: &HostState, spec: &RequestSpec) -> Result<f64, WeighError> {
        Ok(self.weigh_all(&[host], spec)?.raw[0])
    }

    /// The class's own `weight_multiplier` gives each host's multiplier, through
    /// [`weigh_all`](HostWeigher::weigh_all), the only way the pipeline weighs a
    /// weigher that weighs all at once; this setting (no aggregate key) is not read.
    fn multiplier_setting(&self) -> MultiplierSetting {
        MultiplierSetting::new("", 1.0)
    }

    fn weighs_all_at_once(&self) -> bool {
        true
    }

    /// nova's weight handler for this class: `weigh_objects` over the list, its
    /// `minval`/`maxval` as it leaves them, `weight_multiplier` per host; an
    /// exception fails the request with its class, as in nova.
    fn weigh_all(
        &self,
        hosts: &[&HostState],
        spec: &RequestSpec,
    ) -> Result<AllWeights, WeighError> {
        let Some(primitive) = spec.primitive.as_deref() else {
            return Err(WeighError {
                class: "RuntimeError",
                message: format!(
                    "no request object for the Python weigher {} (the request was not received over RPC)",
                    self.name
                ),
            });
        };
        let texts = host_texts(hosts);
        let changes = spec_changes(spec).to_string();
        Python::attach(|py| {
            let bridge = self.interpreter.bridge.bind(py);
            let run = || -> PyResult<HandlerWeights> {
                let states = bridge.call_method1("host_states", (texts,))?;
                let spec = bridge.call_method1("request_spec", (primitive, changes))?;
                bridge
                    .call_method1("weigh_all", (self.instance.bind(py), states, spec))?
                    .extract()
            };
            run().map_err(|e| {
                let class = e
                    .get_type(py)
                    .name()
                    .map(|n| interned(&n.to_string_lossy()))
                    .unwrap_or("Exception");
                warn!(
                    weigher = self.name,
                    "the Python weigher {} raised: {}",
                    self.name,
                    described(py, &e)
                );
                WeighError {
                    class,
                    message: e.value(py).to_string(),
                }
            })
        })
        .map(|(raw, minval, maxval, multipliers)| AllWeights {
            raw,
            minval,
            maxval,
            multipliers,
        })
    }
}

/// What the daemon changed in the call's request spec since it was received, for
/// the interpreter's copy: the instance being placed, the group's hosts so far,
/// the request filters' destination and root traits.
fn spec_changes(spec: &RequestSpec) -> Value {
    let mut changes = json!({
        "instance_uuid": spec.instance_uuid,
        "root_required": spec.request_level_params.root_required,
        "root_forbidden": spec.request_level_params.root_forbidden,
    });
    if let Some(group) = &spec.instance_group {
        changes["group_hosts"] = json!(group.hosts);
    }
    if let Some(d) = &spec.requested_destination {
        changes["requested_destination"] = json!({
            "aggregates": d.aggregates,
            "forbidden_aggregates": d.forbidden_aggregates,
        });
    }
    changes
}

/// A host state as `bridge.py` builds nova's `HostState` from it: nova's attribute
/// names, the database columns' JSON where nova parses a column into an object.
fn host_json(h: &HostState) -> Value {
    let s = &h.service;
    json!({
        "host": &*h.host,
        "nodename": &*h.nodename,
        "cell_uuid": &*h.cell_uuid,
        "uuid": h.uuid.as_deref(),
        "total_usable_ram_mb": h.total_usable_ram_mb,
        "free_ram_mb": h.free_ram_mb,
        "total_usable_disk_gb": h.total_usable_disk_gb,
        "disk_mb_used": h.disk_mb_used,
        "free_disk_mb": h.free_disk_mb,
        "vcpus_total": h.vcpus_total,
        "vcpus_used": h.vcpus_used,
        "cpu_allocation_ratio": h.cpu_allocation_ratio,
        "ram_allocation_ratio": h.ram_allocation_ratio,
        "disk_allocation_ratio": h.disk_allocation_ratio,
        "stats": h.stats.iter().map(|(k, v)| (k.to_string(), Value::from(&**v))).collect::<serde_json::Map<_, _>>(),
        "num_instances": h.num_instances,
        "num_io_ops": h.num_io_ops,
        "failed_builds": h.failed_builds,
        "host_ip": h.host_ip.as_deref(),
        "hypervisor_type": h.hypervisor_type.as_deref(),
        "hypervisor_version": h.hypervisor_version,
        "hypervisor_hostname": h.hypervisor_hostname.as_deref(),
        "cpu_info": h.cpu_info.as_deref(),
        "supported_instances": &*h.supported_instances,
        "numa_topology": h.numa_topology.as_deref(),
        "pci_stats": h.pci_stats.as_deref(),
        "metrics": h.metrics.as_deref(),
        "aggregates": h.aggregates.iter().map(|a| json!({
            "id": a.id,
            "uuid": a.uuid,
            "name": a.name,
            "hosts": a.hosts,
            "metadata": a.metadata,
        })).collect::<Vec<_>>(),
        "instances": &*h.instances,
        "service": {
            "id": s.id,
            "host": &*s.host,
            "binary": "nova-compute",
            "topic": "compute",
            "disabled": s.disabled,
            "disabled_reason": s.disabled_reason.as_deref(),
            "forced_down": s.forced_down,
            "last_seen_up": s.last_seen_up.map(|t| t.to_rfc3339()),
            "created_at": s.created_at.map(|t| t.to_rfc3339()),
            "updated_at": s.updated_at.map(|t| t.to_rfc3339()),
            "version": s.version,
        },
        "updated": h.updated.map(|t| t.to_rfc3339()),
        "limits": h.limits,
        "allocation_candidates": h.allocation_candidates.iter().map(|c| c.json().clone()).collect::<Vec<_>>(),
    })
}
