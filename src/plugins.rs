// SPDX-License-Identifier: Apache-2.0
//! Filters and weighers that are not nova's own: an operator's Python classes, named
//! in `[filter_scheduler] available_filters` and `weight_classes` as nova names them,
//! run unchanged in an embedded CPython ([`python`], the `python` cargo feature).
//!
//! nova's loader reads `available_filters` (class paths, or paths of functions that
//! return classes; `nova.scheduler.filters.all_filters` by default) and
//! `enabled_filters` names classes among them. nova's own entries are built in
//! here; every other entry is loaded by nova's own loader in the embedded
//! interpreter, and the classes it yields can be enabled by their class name. A
//! class of the operator's that takes a nova filter's name wins, as the last class
//! of a name wins in nova's map.
//!
//! New filters and weighers can be WebAssembly modules ([`wasm`], the `wasm` cargo
//! feature), listed in `[nova_scheduler_rs] wasm_plugins` and enabled by their file
//! names; they are looked up before the Python classes.

#[cfg(feature = "python")]
pub mod python;
#[cfg(feature = "wasm")]
pub mod wasm;

use crate::config::PluginFailure;
use crate::filters::{CustomFilters, HostFilter};
use crate::weighers::{CustomWeighers, HostWeigher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Why the operator's classes cannot be run.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PluginError {
    #[error(
        "[filter_scheduler] names {entries}: this build of nova-scheduler-rs has no \
         embedded Python (built without the `python` feature), so it cannot run filter \
         or weigher classes that are not nova's"
    )]
    NoPython { entries: String },
    #[error("the Python interpreter for [filter_scheduler] available_filters: {0}")]
    Interpreter(String),
    /// Loading or instantiating a class raised; the exception as Python prints it.
    #[error("{0}")]
    Raised(String),
    #[error(
        "[nova_scheduler_rs] wasm_plugins names {paths}: this build of nova-scheduler-rs \
         has no WebAssembly runtime (built without the `wasm` feature)"
    )]
    NoWasm { paths: String },
    /// A module of `wasm_plugins` cannot be run; why, naming its file.
    #[error("[nova_scheduler_rs] wasm_plugins: {0}")]
    Wasm(String),
}

/// Plugin names live as long as the process (the chain names filters `&'static`);
/// each distinct name is kept once, however often profiles are rebuilt.
#[cfg(any(feature = "python", feature = "wasm"))]
pub(crate) fn interned(name: &str) -> &'static str {
    use std::collections::BTreeSet;
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<BTreeSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(kept) = names.get(name) {
        return kept;
    }
    let kept: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(kept);
    kept
}

/// The `[nova_scheduler_rs]` options of the WebAssembly plugins.
#[derive(Debug, Clone)]
pub struct WasmOptions {
    pub paths: Vec<PathBuf>,
    pub failure: PluginFailure,
    pub deadline: Duration,
    pub multipliers: Vec<(String, f64)>,
}

/// Every source of filters and weighers beside nova's: the WebAssembly modules
/// first (their names are their files'), then the operator's Python classes.
#[derive(Default, Clone)]
pub struct Plugins {
    sources: Vec<Arc<dyn PluginSource>>,
}

/// A source of filters and of weighers.
trait PluginSource: CustomFilters + CustomWeighers {}
impl<T: CustomFilters + CustomWeighers> PluginSource for T {}

/// Only filters, or only weighers, from a source of the other kind too.
struct FiltersOnly(Box<dyn CustomFilters>);
struct WeighersOnly(Box<dyn CustomWeighers>);

impl CustomFilters for FiltersOnly {
    fn names(&self) -> Vec<String> {
        self.0.names()
    }
    fn build(&self, name: &str) -> Option<Result<Box<dyn HostFilter>, String>> {
        self.0.build(name)
    }
}
impl CustomWeighers for FiltersOnly {
    fn build(&self, _: &str) -> Option<Result<Vec<Box<dyn HostWeigher>>, String>> {
        None
    }
}
impl CustomFilters for WeighersOnly {
    fn names(&self) -> Vec<String> {
        Vec::new()
    }
    fn build(&self, _: &str) -> Option<Result<Box<dyn HostFilter>, String>> {
        None
    }
}
impl CustomWeighers for WeighersOnly {
    fn build(&self, entry: &str) -> Option<Result<Vec<Box<dyn HostWeigher>>, String>> {
        self.0.build(entry)
    }
}

impl Plugins {
    /// The modules of `wasm_plugins`, the Python filter classes of
    /// `available_filters` and weigher classes of `weight_classes`.
    pub fn load(
        wasm: &WasmOptions,
        available_filters: &[String],
        weight_classes: &[String],
        python: &PythonSetup,
    ) -> Result<Self, PluginError> {
        let mut plugins = Plugins::default();
        if let Some(modules) = load_wasm(wasm)? {
            plugins.sources.push(modules);
        }
        if let Some(filters) = load_custom_filters(available_filters, python)? {
            plugins.sources.push(Arc::new(FiltersOnly(filters)));
        }
        if let Some(weighers) = load_custom_weighers(weight_classes, python)? {
            plugins.sources.push(Arc::new(WeighersOnly(weighers)));
        }
        Ok(plugins)
    }

    /// `None` when there is no plugin at all.
    pub fn filters(&self) -> Option<&dyn CustomFilters> {
        (!self.sources.is_empty()).then_some(self as &dyn CustomFilters)
    }

    pub fn weighers(&self) -> Option<&dyn CustomWeighers> {
        (!self.sources.is_empty()).then_some(self as &dyn CustomWeighers)
    }
}

impl CustomFilters for Plugins {
    fn names(&self) -> Vec<String> {
        self.sources
            .iter()
            .flat_map(|s| CustomFilters::names(s.as_ref()))
            .collect()
    }

    fn build(&self, name: &str) -> Option<Result<Box<dyn HostFilter>, String>> {
        self.sources
            .iter()
            .find_map(|s| CustomFilters::build(s.as_ref(), name))
    }
}

impl CustomWeighers for Plugins {
    fn build(&self, entry: &str) -> Option<Result<Vec<Box<dyn HostWeigher>>, String>> {
        self.sources
            .iter()
            .find_map(|s| CustomWeighers::build(s.as_ref(), entry))
    }
}

/// The modules of `wasm_plugins`, compiled and checked; `Ok(None)` when none is named.
fn load_wasm(options: &WasmOptions) -> Result<Option<Arc<dyn PluginSource>>, PluginError> {
    if options.paths.is_empty() {
        if let Some((name, _)) = options.multipliers.first() {
            return Err(PluginError::Wasm(format!(
                "[nova_scheduler_rs] plugin_weight_multipliers names {name}, and \
                 wasm_plugins names no module"
            )));
        }
        return Ok(None);
    }
    #[cfg(feature = "wasm")]
    {
        Ok(Some(Arc::new(wasm::WasmPlugins::load(options)?)))
    }
    #[cfg(not(feature = "wasm"))]
    {
        Err(PluginError::NoWasm {
            paths: options
                .paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

/// An `available_filters` entry that names nova's own filters (built in here).
pub fn is_nova_entry(entry: &str) -> bool {
    let entry = entry.trim();
    entry == "nova.scheduler.filters.all_filters" || entry.starts_with("nova.scheduler.filters.")
}

/// The `available_filters` entries that are not nova's.
pub fn custom_entries(available: &[String]) -> Vec<String> {
    available
        .iter()
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty() && !is_nova_entry(e))
        .collect()
}

/// Where the embedded interpreter takes its packages and nova.conf from.
#[derive(Debug, Clone, Default)]
pub struct PythonSetup {
    /// `[nova_scheduler_rs] python`; `None`: `nova-scheduler`'s interpreter.
    pub interpreter: Option<PathBuf>,
    /// The daemon's nova.conf files and directories, read again by oslo.config.
    pub config_files: Vec<PathBuf>,
    pub config_dirs: Vec<PathBuf>,
}

impl PythonSetup {
    /// The interpreter to take packages from: the configured one, else the one on
    /// the `#!` line of `nova-scheduler` on `PATH`.
    pub fn interpreter(&self) -> Result<PathBuf, PluginError> {
        if let Some(path) = &self.interpreter {
            return Ok(path.clone());
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        let script = std::env::split_paths(&path)
            .map(|dir| dir.join("nova-scheduler"))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                PluginError::Interpreter(
                    "set [nova_scheduler_rs] python to the bin/python of the environment \
                     nova is installed in (no nova-scheduler on PATH to take it from)"
                        .to_string(),
                )
            })?;
        shebang_interpreter(&script)
    }
}

/// The interpreter of a script's `#!` line.
fn shebang_interpreter(script: &Path) -> Result<PathBuf, PluginError> {
    let text = std::fs::read(script)
        .map_err(|e| PluginError::Interpreter(format!("{}: {e}", script.display())))?;
    let first = text.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(first);
    line.strip_prefix("#!")
        .and_then(|rest| rest.split_whitespace().next())
        .filter(|p| !p.ends_with("/env"))
        .map(PathBuf::from)
        .ok_or_else(|| {
            PluginError::Interpreter(format!(
                "{} has no #! line naming its interpreter: set [nova_scheduler_rs] python",
                script.display()
            ))
        })
}

/// A `weight_classes` entry that names nova's own weighers (built in here): its
/// `all_weighers`, a class path under `nova.scheduler.weights`, or a bare class name.
pub fn is_nova_weigher_entry(entry: &str) -> bool {
    let entry = entry.trim();
    entry.starts_with("nova.scheduler.weights.") || !entry.contains('.')
}

/// The operator's weigher classes that `weight_classes` names, loaded entry by entry
/// as the pipeline is built; `Ok(None)` when every entry is nova's.
pub fn load_custom_weighers(
    weight_classes: &[String],
    setup: &PythonSetup,
) -> Result<Option<Box<dyn CustomWeighers>>, PluginError> {
    let entries: Vec<String> = weight_classes
        .iter()
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty() && !is_nova_weigher_entry(e))
        .collect();
    if entries.is_empty() {
        return Ok(None);
    }
    #[cfg(feature = "python")]
    {
        let classes = python::PythonWeigherClasses::new(entries, setup)?;
        Ok(Some(Box::new(classes)))
    }
    #[cfg(not(feature = "python"))]
    {
        let _ = setup;
        Err(PluginError::NoPython {
            entries: entries.join(", "),
        })
    }
}

/// The operator's filter classes that `available_filters` names, ready to be
/// enabled by name; `Ok(None)` when every entry is nova's.
pub fn load_custom_filters(
    available: &[String],
    setup: &PythonSetup,
) -> Result<Option<Box<dyn CustomFilters>>, PluginError> {
    let entries = custom_entries(available);
    if entries.is_empty() {
        return Ok(None);
    }
    #[cfg(feature = "python")]
    {
        let classes = python::PythonFilterClasses::load(entries, setup)?;
        Ok(Some(Box::new(classes)))
    }
    #[cfg(not(feature = "python"))]
    {
        let _ = setup;
        Err(PluginError::NoPython {
            entries: entries.join(", "),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nova_entries_are_built_in_and_the_rest_are_custom() {
        let available = vec![
            "nova.scheduler.filters.all_filters".to_string(),
            " mycloud.filters.RackFilter ".to_string(),
            "nova.scheduler.filters.compute_filter.ComputeFilter".to_string(),
            "mycloud.filters.all".to_string(),
        ];
        assert_eq!(
            custom_entries(&available),
            vec!["mycloud.filters.RackFilter", "mycloud.filters.all"]
        );
        assert!(
            load_custom_filters(&available[..1], &PythonSetup::default())
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn the_interpreter_is_read_from_a_shebang() {
        let dir = std::env::temp_dir().join(format!("nsrs-shebang-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("nova-scheduler");
        std::fs::write(&script, "#!/opt/nova/bin/python3 -s\nimport sys\n").unwrap();
        assert_eq!(
            shebang_interpreter(&script).unwrap(),
            PathBuf::from("/opt/nova/bin/python3")
        );
        std::fs::write(&script, "#!/usr/bin/env python3\n").unwrap();
        assert!(shebang_interpreter(&script).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
