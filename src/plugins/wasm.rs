// SPDX-License-Identifier: Apache-2.0
//! New filters and weighers as WebAssembly modules (wasmtime), named in
//! `[nova_scheduler_rs] wasm_plugins` and enabled by their file names in
//! `enabled_filters` and `weight_classes`.
//!
//! One call per request per plugin: the candidate hosts as a columnar table plus the
//! request's fields ([`abi`], docs/wasm-plugins.md) go in; a pass bitmap with a
//! reason per rejected host, or one raw weight per host, comes out. A module is
//! sandboxed: it may import nothing, its memory is bounded, and an epoch deadline
//! cuts a call off after `plugin_deadline_ms`. A call that traps, runs past its
//! deadline or answers garbage is a failure: a warning, the metric
//! `nova_scheduler_plugin_failures_total`, and then `plugin_failure` decides.
//!
//! Instances are kept between calls (one per concurrent call), so a call pays no
//! instantiation; a failed instance is dropped and the next call starts afresh.

pub mod abi;

use super::PluginError;
use crate::config::PluginFailure;
use crate::filters::{CustomFilters, FilterRequest, HostFilter};
use crate::model::{HostState, RequestSpec};
use crate::weighers::aggregate_multiplier::MultiplierSetting;
use crate::weighers::{AllWeights, CustomWeighers, HostWeigher, WeighError};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tracing::warn;
use wasmtime::{
    Config, Engine, Instance, Memory, Module, Store, StoreLimits, StoreLimitsBuilder, Trap,
    TypedFunc,
};

/// How often the epoch advances while a plugin call runs.
const TICK: Duration = Duration::from_micros(500);
/// A module's linear memory may not grow past this.
const MEMORY_LIMIT: usize = 256 << 20;
/// Instances kept idle per plugin.
const IDLE_KEPT: usize = 4;

/// The `[nova_scheduler_rs]` plugin options.
pub type WasmSetup = super::WasmOptions;

/// The engine every plugin is compiled by, with the thread that advances its epoch.
struct Runtime {
    engine: Engine,
    /// Plugin calls running; the ticker sleeps while there are none.
    running: AtomicUsize,
    ticker: std::thread::Thread,
}

fn runtime() -> Result<&'static Runtime, PluginError> {
    static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            let mut config = Config::new();
            config.epoch_interruption(true);
            let engine = Engine::new(&config).map_err(|e| e.to_string())?;
            let ticking = engine.clone();
            let ticker = std::thread::Builder::new()
                .name("wasm-epoch".into())
                .spawn(move || loop {
                    let running = RUNTIME
                        .get()
                        .and_then(|r| r.as_ref().ok())
                        .map_or(0, |r| r.running.load(Ordering::Acquire));
                    if running == 0 {
                        std::thread::park();
                        continue;
                    }
                    std::thread::sleep(TICK);
                    ticking.increment_epoch();
                })
                .map_err(|e| e.to_string())?
                .thread()
                .clone();
            Ok(Runtime {
                engine,
                running: AtomicUsize::new(0),
                ticker,
            })
        })
        .as_ref()
        .map_err(|e| PluginError::Wasm(format!("the WebAssembly engine: {e}")))
}

/// Keeps the epoch advancing while a call runs.
struct Running(&'static Runtime);

impl Running {
    fn start(rt: &'static Runtime) -> Self {
        rt.running.fetch_add(1, Ordering::AcqRel);
        rt.ticker.unpark();
        Running(rt)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a module does.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Filter,
    Weigher,
}

impl Kind {
    fn export(self) -> &'static str {
        match self {
            Kind::Filter => "nsrs_filter",
            Kind::Weigher => "nsrs_weigh",
        }
    }

    /// The argument of `nsrs_columns`: 0 a filter, 1 a weigher.
    fn code(self) -> i32 {
        match self {
            Kind::Filter => 0,
            Kind::Weigher => 1,
        }
    }
}

/// One instance of a module, ready for a call.
struct Loaded {
    store: Store<StoreLimits>,
    memory: Memory,
    alloc: TypedFunc<i32, i32>,
    filter: Option<TypedFunc<(i32, i32), i64>>,
    weigh: Option<TypedFunc<(i32, i32), i64>>,
}

/// A compiled module and its idle instances.
struct Plugin {
    name: &'static str,
    path: PathBuf,
    module: Module,
    rt: &'static Runtime,
    failure: PluginFailure,
    deadline: Duration,
    /// `nsrs_flags`: bit 0 `RUN_ON_REBUILD`, bit 1 `run_filter_once_per_request`.
    flags: u32,
    /// The columns a filter's and a weigher's input carry (`nsrs_columns`; all
    /// when it does not say).
    columns: [abi::ColumnSet; 2],
    idle: Mutex<Vec<Loaded>>,
}

/// Why one call failed.
#[derive(Debug, Clone)]
struct Fault {
    /// The metric's label: `deadline`, `trap` or `garbage`.
    cause: &'static str,
    detail: String,
}

impl Plugin {
    fn load(path: &Path, setup: &WasmSetup) -> Result<(Self, Vec<Kind>), PluginError> {
        let rt = runtime()?;
        let shown = path.display();
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| PluginError::Wasm(format!("{shown}: no file name to name it by")))?;
        let module = Module::from_file(&rt.engine, path)
            .map_err(|e| PluginError::Wasm(format!("{shown}: {e:#}")))?;
        let imports: Vec<String> = module
            .imports()
            .map(|i| format!("{}.{}", i.module(), i.name()))
            .collect();
        if !imports.is_empty() {
            return Err(PluginError::Wasm(format!(
                "{shown} imports {}: a plugin may import nothing (it is given its input and \
                 answers in its own memory)",
                imports.join(", ")
            )));
        }
        let exports: Vec<&str> = module.exports().map(|e| e.name()).collect();
        let kinds: Vec<Kind> = [Kind::Filter, Kind::Weigher]
            .into_iter()
            .filter(|k| exports.contains(&k.export()))
            .collect();
        if kinds.is_empty() {
            return Err(PluginError::Wasm(format!(
                "{shown} exports neither nsrs_filter nor nsrs_weigh"
            )));
        }
        let mut plugin = Plugin {
            name: super::interned(name),
            path: path.to_path_buf(),
            module,
            rt,
            failure: setup.failure,
            deadline: setup.deadline,
            flags: 0,
            columns: [abi::ColumnSet::all(); 2],
            idle: Mutex::new(Vec::new()),
        };
        // A first instance checks the exports and the ABI version, and reads the flags
        // and the columns it wants.
        let _running = Running::start(rt);
        let mut store = plugin.store();
        let instance = Instance::new(&mut store, &plugin.module, &[])
            .map_err(|e| PluginError::Wasm(format!("{shown}: instantiating: {e:#}")))?;
        let version = instance
            .get_typed_func::<(), i32>(&mut store, "nsrs_abi_version")
            .and_then(|f| f.call(&mut store, ()))
            .map_err(|e| PluginError::Wasm(format!("{shown}: nsrs_abi_version: {e:#}")))?;
        if version != abi::ABI_VERSION as i32 {
            return Err(PluginError::Wasm(format!(
                "{shown} is written for plugin ABI {version}; this daemon speaks ABI {}",
                abi::ABI_VERSION
            )));
        }
        if let Ok(flags) = instance.get_typed_func::<(), i32>(&mut store, "nsrs_flags") {
            plugin.flags = flags
                .call(&mut store, ())
                .map_err(|e| PluginError::Wasm(format!("{shown}: nsrs_flags: {e:#}")))?
                as u32;
        }
        if let Ok(columns) = instance.get_typed_func::<i32, i64>(&mut store, "nsrs_columns") {
            for kind in kinds.iter().copied() {
                let packed = columns
                    .call(&mut store, kind.code())
                    .map_err(|e| PluginError::Wasm(format!("{shown}: nsrs_columns: {e:#}")))?
                    as u64;
                let (at, len) = ((packed >> 32) as usize, (packed & 0xffff_ffff) as usize);
                let memory = instance
                    .get_memory(&mut store, "memory")
                    .ok_or_else(|| PluginError::Wasm(format!("{shown} exports no memory")))?;
                let ids: Vec<u32> = memory
                    .data(&store)
                    .get(at..at.saturating_add(len))
                    .filter(|b| b.len() % 4 == 0 && b.len() <= 4 * 128)
                    .ok_or_else(|| {
                        PluginError::Wasm(format!(
                            "{shown}: nsrs_columns({}) answered {len} bytes at {at}: not a \
                             list of u32 column ids in its memory",
                            kind.code()
                        ))
                    })?
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                plugin.columns[kind.code() as usize] = abi::ColumnSet::of(&ids).map_err(|e| {
                    PluginError::Wasm(format!("{shown}: nsrs_columns({}) {e}", kind.code()))
                })?;
            }
        }
        let loaded = plugin
            .ready(store, instance)
            .map_err(|e| PluginError::Wasm(format!("{shown}: {}", e.detail)))?;
        plugin
            .idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(loaded);
        Ok((plugin, kinds))
    }

    fn store(&self) -> Store<StoreLimits> {
        let limits = StoreLimitsBuilder::new()
            .memory_size(MEMORY_LIMIT)
            .instances(1)
            .build();
        let mut store = Store::new(&self.rt.engine, limits);
        store.limiter(|limits| limits);
        // Every entry into the module (its start function included) has the deadline.
        store.set_epoch_deadline(self.deadline_ticks());
        store
    }

    /// The deadline in epoch ticks.
    fn deadline_ticks(&self) -> u64 {
        (self.deadline.as_micros() / TICK.as_micros()).max(1) as u64
    }

    /// The exports a call uses, from an instance.
    fn ready(&self, mut store: Store<StoreLimits>, instance: Instance) -> Result<Loaded, Fault> {
        let garbage = |detail: String| Fault {
            cause: "garbage",
            detail,
        };
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or_else(|| garbage("exports no memory named \"memory\"".into()))?;
        let alloc = instance
            .get_typed_func::<i32, i32>(&mut store, "nsrs_alloc")
            .map_err(|e| garbage(format!("nsrs_alloc: {e:#}")))?;
        let mut entry = |kind: Kind| match instance.get_export(&mut store, kind.export()) {
            None => Ok(None),
            Some(_) => instance
                .get_typed_func::<(i32, i32), i64>(&mut store, kind.export())
                .map(Some)
                .map_err(|e| garbage(format!("{}: {e:#}", kind.export()))),
        };
        let filter = entry(Kind::Filter)?;
        let weigh = entry(Kind::Weigher)?;
        Ok(Loaded {
            store,
            memory,
            alloc,
            filter,
            weigh,
        })
    }

    fn instantiate(&self) -> Result<Loaded, Fault> {
        let mut store = self.store();
        let instance = Instance::new(&mut store, &self.module, &[]).map_err(|e| Fault {
            cause: "trap",
            detail: format!("instantiating: {e:#}"),
        })?;
        self.ready(store, instance)
    }

    /// One call over `hosts`: the input encoded (into a buffer this thread keeps),
    /// the answer read in place by `decode`.
    fn call<T>(
        &self,
        kind: Kind,
        hosts: &[&HostState],
        request: &str,
        decode: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<T, Fault> {
        thread_local! {
            static INPUT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        INPUT.with_borrow_mut(|input| {
            abi::encode_into(input, hosts, request, self.columns[kind.code() as usize]);
            self.call_with(kind, input, decode)
        })
    }

    fn call_with<T>(
        &self,
        kind: Kind,
        input: &[u8],
        decode: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<T, Fault> {
        let _running = Running::start(self.rt);
        let kept = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut loaded = match kept {
            Some(loaded) => loaded,
            None => self.instantiate()?,
        };
        let answer = self.run(&mut loaded, kind, input, decode);
        if answer.is_ok() {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < IDLE_KEPT {
                idle.push(loaded);
            }
        }
        answer
    }

    fn run<T>(
        &self,
        loaded: &mut Loaded,
        kind: Kind,
        input: &[u8],
        decode: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<T, Fault> {
        loaded.store.set_epoch_deadline(self.deadline_ticks());
        let trapped = |e: wasmtime::Error| match e.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => Fault {
                cause: "deadline",
                detail: format!(
                    "ran past its deadline of {} ms and was cut off",
                    self.deadline.as_secs_f64() * 1e3
                ),
            },
            _ => Fault {
                cause: "trap",
                detail: format!("trapped: {e:#}"),
            },
        };
        let garbage = |detail: String| Fault {
            cause: "garbage",
            detail,
        };
        let len = i32::try_from(input.len())
            .map_err(|_| garbage(format!("an input of {} bytes", input.len())))?;
        let at = loaded.alloc.call(&mut loaded.store, len).map_err(trapped)?;
        loaded
            .memory
            .write(&mut loaded.store, at as u32 as usize, input)
            .map_err(|_| {
                garbage(format!(
                    "nsrs_alloc({len}) gave {at}, not room for the input in its memory"
                ))
            })?;
        let run = match kind {
            Kind::Filter => loaded.filter.as_ref(),
            Kind::Weigher => loaded.weigh.as_ref(),
        }
        .cloned()
        .ok_or_else(|| garbage(format!("no {} export", kind.export())))?;
        let packed = run.call(&mut loaded.store, (at, len)).map_err(trapped)? as u64;
        let (out_at, out_len) = ((packed >> 32) as usize, (packed & 0xffff_ffff) as usize);
        let answer = loaded
            .memory
            .data(&loaded.store)
            .get(out_at..out_at.saturating_add(out_len))
            .ok_or_else(|| {
                garbage(format!(
                    "{} answered {out_len} bytes at {out_at}, outside its memory",
                    kind.export()
                ))
            })?;
        decode(answer).map_err(garbage)
    }

    /// Counts and logs a failure.
    fn failed(&self, kind: Kind, fault: &Fault) {
        crate::observe::metrics().plugin_failure(self.name, fault.cause);
        let what = match kind {
            Kind::Filter => "filter",
            Kind::Weigher => "weigher",
        };
        let then = match (self.failure, kind) {
            (PluginFailure::FailOpen, Kind::Filter) => "every host passes it (fail_open)",
            (PluginFailure::FailOpen, Kind::Weigher) => "it weighs every host the same (fail_open)",
            (PluginFailure::FailClosed, Kind::Filter) => "it rejects every host (fail_closed)",
            (PluginFailure::FailClosed, Kind::Weigher) => "the request fails (fail_closed)",
        };
        warn!(
            plugin = self.name,
            path = %self.path.display(),
            cause = fault.cause,
            "the Wasm {what} {} {}; for this call {then}",
            self.name,
            fault.detail
        );
    }
}

/// The request as plugins read it (JSON, once per call).
/// For a filter, `filter` is the instance's index, the rebuild marker and whether
/// the reasons for rejected hosts are wanted (only `explain` reads them).
pub fn request_json(spec: &RequestSpec, filter: Option<(usize, bool, bool)>) -> String {
    let flavor = &spec.flavor;
    let mut out = json!({
        "project_id": spec.project_id,
        "user_id": spec.user_id,
        "availability_zone": spec.availability_zone,
        "num_instances": spec.num_instances,
        "instance_uuid": spec.instance_uuid,
        "flavor": {
            "name": flavor.name,
            "flavorid": flavor.flavorid,
            "memory_mb": flavor.memory_mb,
            "vcpus": flavor.vcpus,
            "root_gb": flavor.root_gb,
            "ephemeral_gb": flavor.ephemeral_gb,
            "swap": flavor.swap,
            "extra_specs": flavor.extra_specs,
        },
        "image": spec.image.as_ref().map(|i| json!({
            "id": i.id,
            "name": i.name,
            "disk_format": i.disk_format,
            "properties": i.properties,
        })),
        "scheduler_hints": spec.scheduler_hints.clone().unwrap_or_default(),
        "instance_group": spec.instance_group.as_ref().map(|g| json!({
            "uuid": g.uuid,
            "policy": g.policy,
            "members": g.members,
            "hosts": g.hosts,
        })),
        "is_bfv": spec.is_bfv,
    });
    if let Some((index, is_rebuild, reasons)) = filter {
        out["instance_index"] = Value::from(index);
        out["is_rebuild"] = Value::from(is_rebuild);
        out["reasons"] = Value::from(reasons);
    }
    out.to_string()
}

/// The modules of `wasm_plugins`, compiled and checked.
pub struct WasmPlugins {
    filters: Vec<Arc<Plugin>>,
    weighers: Vec<(Arc<Plugin>, f64)>,
}

impl WasmPlugins {
    pub fn load(setup: &WasmSetup) -> Result<Self, PluginError> {
        let mut filters = Vec::new();
        let mut weighers = Vec::new();
        let mut names = Vec::new();
        for path in &setup.paths {
            let (plugin, kinds) = Plugin::load(path, setup)?;
            if names.contains(&plugin.name) {
                return Err(PluginError::Wasm(format!(
                    "{}: a second plugin named {}",
                    path.display(),
                    plugin.name
                )));
            }
            names.push(plugin.name);
            let plugin = Arc::new(plugin);
            for kind in kinds {
                match kind {
                    Kind::Filter => filters.push(Arc::clone(&plugin)),
                    Kind::Weigher => {
                        let multiplier = setup
                            .multipliers
                            .iter()
                            .rev()
                            .find(|(n, _)| n == plugin.name)
                            .map_or(1.0, |(_, m)| *m);
                        weighers.push((Arc::clone(&plugin), multiplier));
                    }
                }
            }
        }
        for (name, _) in &setup.multipliers {
            if !weighers.iter().any(|(p, _)| p.name == name) {
                return Err(PluginError::Wasm(format!(
                    "[nova_scheduler_rs] plugin_weight_multipliers names {name}, which is \
                     not a weigher of wasm_plugins"
                )));
            }
        }
        Ok(WasmPlugins { filters, weighers })
    }

    /// The filter plugin named `name`, as a filter of the chain.
    pub fn filter(&self, name: &str) -> Option<WasmFilter> {
        self.filters
            .iter()
            .find(|p| p.name == name)
            .map(|p| WasmFilter(Arc::clone(p)))
    }

    /// The weigher plugin named `name`, as a weigher of the pipeline.
    pub fn weigher(&self, name: &str) -> Option<WasmWeigher> {
        self.weighers
            .iter()
            .find(|(p, _)| p.name == name)
            .map(|(p, m)| WasmWeigher {
                plugin: Arc::clone(p),
                multiplier: *m,
            })
    }
}

impl CustomFilters for WasmPlugins {
    fn names(&self) -> Vec<String> {
        self.filters.iter().map(|p| p.name.to_string()).collect()
    }

    fn build(&self, name: &str) -> Option<Result<Box<dyn HostFilter>, String>> {
        self.filter(name)
            .map(|f| Ok(Box::new(f) as Box<dyn HostFilter>))
    }
}

impl CustomWeighers for WasmPlugins {
    fn build(&self, entry: &str) -> Option<Result<Vec<Box<dyn HostWeigher>>, String>> {
        self.weigher(entry)
            .map(|w| Ok(vec![Box::new(w) as Box<dyn HostWeigher>]))
    }
}

/// A filter plugin in the chain.
pub struct WasmFilter(Arc<Plugin>);

impl WasmFilter {
    /// The plugin's verdicts over `hosts` (with the reasons when `reasons`), or
    /// what `plugin_failure` makes of a failure.
    pub fn verdicts(
        &self,
        hosts: &[&HostState],
        req: &FilterRequest<'_>,
        reasons: bool,
    ) -> abi::Verdicts {
        let plugin = &self.0;
        let request = request_json(req.spec, Some((req.index, req.is_rebuild, reasons)));
        let answer = plugin.call(Kind::Filter, hosts, &request, |bytes| {
            abi::decode_verdicts(bytes, hosts.len(), reasons)
        });
        match answer {
            Ok(verdicts) => verdicts,
            Err(fault) => {
                plugin.failed(Kind::Filter, &fault);
                let pass = plugin.failure == PluginFailure::FailOpen;
                abi::Verdicts {
                    passes: vec![pass; hosts.len()],
                    reasons: vec![
                        (!pass).then(|| format!(
                            "the Wasm filter {} failed: {}",
                            plugin.name, fault.detail
                        ));
                        hosts.len()
                    ],
                }
            }
        }
    }
}

impl HostFilter for WasmFilter {
    fn name(&self) -> &'static str {
        self.0.name
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        self.verdicts(&[host], req, false).passes[0]
    }

    fn run_on_rebuild(&self) -> bool {
        self.0.flags & 1 != 0
    }

    fn once_per_request(&self) -> bool {
        self.0.flags & 2 != 0
    }

    fn filters_all_at_once(&self) -> bool {
        true
    }

    fn filter_all(&self, hosts: &[&HostState], req: &FilterRequest<'_>) -> Vec<bool> {
        self.verdicts(hosts, req, false).passes
    }

    fn rejection_reasons(
        &self,
        hosts: &[&HostState],
        req: &FilterRequest<'_>,
    ) -> Vec<Option<String>> {
        let verdicts = self.verdicts(hosts, req, true);
        verdicts
            .passes
            .iter()
            .zip(verdicts.reasons)
            .map(|(pass, reason)| {
                (!pass).then(|| {
                    reason
                        .filter(|r| !r.is_empty())
                        .unwrap_or_else(|| format!("{} returned False", self.0.name))
                })
            })
            .collect()
    }
}

/// A weigher plugin in the pipeline.
pub struct WasmWeigher {
    plugin: Arc<Plugin>,
    multiplier: f64,
}

impl HostWeigher for WasmWeigher {
    fn name(&self) -> &'static str {
        self.plugin.name
    }

    fn weigh(&self, host: &HostState, spec: &RequestSpec) -> Result<f64, WeighError> {
        Ok(self.weigh_all(&[host], spec)?.raw[0])
    }

    /// `plugin_weight_multipliers`; no aggregate key overrides it.
    fn multiplier_setting(&self) -> MultiplierSetting {
        MultiplierSetting::new("", self.multiplier)
    }

    fn weighs_all_at_once(&self) -> bool {
        true
    }

    fn weigh_all(
        &self,
        hosts: &[&HostState],
        spec: &RequestSpec,
    ) -> Result<AllWeights, WeighError> {
        let plugin = &self.plugin;
        let request = request_json(spec, None);
        let answer = plugin.call(Kind::Weigher, hosts, &request, |bytes| {
            abi::decode_weights(bytes, hosts.len())
        });
        let raw = match answer {
            Ok(raw) => raw,
            Err(fault) => {
                plugin.failed(Kind::Weigher, &fault);
                if plugin.failure == PluginFailure::FailClosed {
                    return Err(WeighError {
                        class: "NoValidHost",
                        // The reason of nova's NoValidHost, which the answer prefixes
                        // with "No valid host was found. ".
                        message: format!(
                            "The Wasm weigher {} failed: {}",
                            plugin.name, fault.detail
                        ),
                    });
                }
                vec![0.0; hosts.len()]
            }
        };
        Ok(AllWeights {
            raw,
            minval: None,
            maxval: None,
            multipliers: vec![self.multiplier; hosts.len()],
        })
    }
}
