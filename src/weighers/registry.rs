// SPDX-License-Identifier: Apache-2.0
//! `[filter_scheduler] weight_classes`: nova class names, dotted paths, and
//! `nova.scheduler.weights.all_weighers`.

use super::build_failure_weigher::BuildFailureWeigher;
use super::cpu_weigher::CPUWeigher;
use super::cross_cell_weigher::CrossCellWeigher;
use super::disk_weigher::DiskWeigher;
use super::hypervisor_version_weigher::HypervisorVersionWeigher;
use super::io_ops_weigher::IoOpsWeigher;
use super::num_instances_weigher::NumInstancesWeigher;
use super::pci_weigher::PCIWeigher;
use super::ram_weigher::RAMWeigher;
use super::server_group_soft_affinity_weigher::ServerGroupSoftAffinityWeigher;
use super::server_group_soft_anti_affinity_weigher::ServerGroupSoftAntiAffinityWeigher;
use super::{HostWeigher, WeigherPipeline};
use tracing::info;

/// The multipliers and settings weighers read, with nova's defaults.
#[derive(Debug, Clone)]
pub struct WeigherConfig {
    pub ram_weight_multiplier: f64,
    pub cpu_weight_multiplier: f64,
    pub disk_weight_multiplier: f64,
    pub io_ops_weight_multiplier: f64,
    pub pci_weight_multiplier: f64,
    pub soft_affinity_weight_multiplier: f64,
    pub soft_anti_affinity_weight_multiplier: f64,
    pub build_failure_weight_multiplier: f64,
    pub cross_cell_move_weight_multiplier: f64,
    pub hypervisor_version_weight_multiplier: f64,
    pub num_instances_weight_multiplier: f64,
    pub image_props_weight_multiplier: f64,
    /// `[metrics] weight_setting` is empty (MetricsWeigher then weighs every host 0).
    pub metrics_weight_setting_empty: bool,
}

impl Default for WeigherConfig {
    fn default() -> Self {
        WeigherConfig {
            ram_weight_multiplier: 1.0,
            cpu_weight_multiplier: 1.0,
            disk_weight_multiplier: 1.0,
            io_ops_weight_multiplier: -1.0,
            pci_weight_multiplier: 1.0,
            soft_affinity_weight_multiplier: 1.0,
            soft_anti_affinity_weight_multiplier: 1.0,
            build_failure_weight_multiplier: 1_000_000.0,
            cross_cell_move_weight_multiplier: 1_000_000.0,
            hypervisor_version_weight_multiplier: 1.0,
            num_instances_weight_multiplier: 0.0,
            image_props_weight_multiplier: 0.0,
            metrics_weight_setting_empty: true,
        }
    }
}

/// `all_weighers` in the order nova 34's loader returns them on a stock install
/// (module directory order, then class name). Weights only add up, so the order
/// matters only through float rounding; we keep nova's to be bit-identical.
pub const ALL_WEIGHERS: &[&str] = &[
    "CrossCellWeigher",
    "NumInstancesWeigher",
    "MetricsWeigher",
    "CPUWeigher",
    "BuildFailureWeigher",
    "ServerGroupSoftAffinityWeigher",
    "ServerGroupSoftAntiAffinityWeigher",
    "RAMWeigher",
    "DiskWeigher",
    "PCIWeigher",
    "ImagePropertiesWeigher",
    "IoOpsWeigher",
    "HypervisorVersionWeigher",
];

const ALL_WEIGHERS_PATH: &str = "nova.scheduler.weights.all_weighers";

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", describe(.unknown, .not_implemented))]
pub struct UnknownWeighers {
    pub unknown: Vec<String>,
    pub not_implemented: Vec<String>,
}

fn describe(unknown: &[String], not_implemented: &[String]) -> String {
    let mut parts = Vec::new();
    if !unknown.is_empty() {
        parts.push(format!(
            "unknown weigher(s) in [filter_scheduler] weight_classes: {}",
            unknown.join(", ")
        ));
    }
    if !not_implemented.is_empty() {
        parts.push(format!(
            "nova weigher(s) not implemented by this scheduler yet and not inert under this configuration: {}",
            not_implemented.join(", ")
        ));
    }
    parts.join("; ")
}

enum Built {
    Weigher(Box<dyn HostWeigher>),
    /// A nova weigher whose contribution is exactly 0 for every host under this config.
    Inert(&'static str),
    NotImplemented,
    Unknown,
}

fn build_one(name: &str, c: &WeigherConfig) -> Built {
    let w: Box<dyn HostWeigher> = match name {
        "RAMWeigher" => Box::new(RAMWeigher {
            multiplier: c.ram_weight_multiplier,
        }),
        "CPUWeigher" => Box::new(CPUWeigher {
            multiplier: c.cpu_weight_multiplier,
        }),
        "DiskWeigher" => Box::new(DiskWeigher {
            multiplier: c.disk_weight_multiplier,
        }),
        "IoOpsWeigher" => Box::new(IoOpsWeigher {
            multiplier: c.io_ops_weight_multiplier,
        }),
        "PCIWeigher" => Box::new(PCIWeigher {
            multiplier: c.pci_weight_multiplier,
        }),
        "BuildFailureWeigher" => Box::new(BuildFailureWeigher {
            multiplier: c.build_failure_weight_multiplier,
        }),
        "CrossCellWeigher" => Box::new(CrossCellWeigher {
            multiplier: c.cross_cell_move_weight_multiplier,
        }),
        "HypervisorVersionWeigher" => Box::new(HypervisorVersionWeigher {
            multiplier: c.hypervisor_version_weight_multiplier,
        }),
        "NumInstancesWeigher" => Box::new(NumInstancesWeigher {
            multiplier: c.num_instances_weight_multiplier,
        }),
        "ServerGroupSoftAffinityWeigher" => Box::new(ServerGroupSoftAffinityWeigher {
            multiplier: c.soft_affinity_weight_multiplier,
        }),
        "ServerGroupSoftAntiAffinityWeigher" => Box::new(ServerGroupSoftAntiAffinityWeigher {
            multiplier: c.soft_anti_affinity_weight_multiplier,
        }),
        // nova returns 0.0 for every host while the *config* multiplier is 0.0.
        "ImagePropertiesWeigher" if c.image_props_weight_multiplier == 0.0 => {
            return Built::Inert("ImagePropertiesWeigher")
        }
        // An empty weight_setting weighs every host 0, which normalizes to 0.
        "MetricsWeigher" if c.metrics_weight_setting_empty => {
            return Built::Inert("MetricsWeigher")
        }
        "ImagePropertiesWeigher" | "MetricsWeigher" => return Built::NotImplemented,
        _ => return Built::Unknown,
    };
    Built::Weigher(w)
}

/// Builds the pipeline from `weight_classes`.
pub fn build_pipeline(
    weight_classes: &[String],
    config: &WeigherConfig,
) -> Result<WeigherPipeline, UnknownWeighers> {
    let mut names: Vec<(String, &str)> = Vec::new();
    for entry in weight_classes {
        let entry = entry.trim();
        if entry == ALL_WEIGHERS_PATH {
            names.extend(ALL_WEIGHERS.iter().map(|n| (entry.to_string(), *n)));
        } else {
            names.push((entry.to_string(), entry.rsplit('.').next().unwrap_or(entry)));
        }
    }
    let mut weighers = Vec::new();
    let mut errors = UnknownWeighers {
        unknown: Vec::new(),
        not_implemented: Vec::new(),
    };
    for (entry, name) in names {
        match build_one(name, config) {
            Built::Weigher(w) => weighers.push(w),
            Built::Inert(n) => info!(
                weigher = n,
                "{n} contributes 0 to every host under this configuration; skipped"
            ),
            Built::NotImplemented => errors.not_implemented.push(name.to_string()),
            Built::Unknown => errors.unknown.push(entry),
        }
    }
    if errors.unknown.is_empty() && errors.not_implemented.is_empty() {
        Ok(WeigherPipeline::new(weighers))
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_weighers_expands_in_nova_order() {
        let p = build_pipeline(&[ALL_WEIGHERS_PATH.into()], &WeigherConfig::default())
            .expect("pipeline");
        assert_eq!(
            p.names(),
            vec![
                "CrossCellWeigher",
                "NumInstancesWeigher",
                "CPUWeigher",
                "BuildFailureWeigher",
                "ServerGroupSoftAffinityWeigher",
                "ServerGroupSoftAntiAffinityWeigher",
                "RAMWeigher",
                "DiskWeigher",
                "PCIWeigher",
                "IoOpsWeigher",
                "HypervisorVersionWeigher",
            ]
        );
    }

    #[test]
    fn dotted_names_and_errors() {
        let p = build_pipeline(
            &["nova.scheduler.weights.ram.RAMWeigher".into()],
            &WeigherConfig::default(),
        )
        .expect("ok");
        assert_eq!(p.names(), vec!["RAMWeigher"]);
        let cfg = WeigherConfig {
            image_props_weight_multiplier: 1.0,
            ..Default::default()
        };
        let err = build_pipeline(&["Bogus".into(), "ImagePropertiesWeigher".into()], &cfg)
            .expect_err("errors");
        assert_eq!(err.unknown, vec!["Bogus"]);
        assert_eq!(err.not_implemented, vec!["ImagePropertiesWeigher"]);
    }
}
