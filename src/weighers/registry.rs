// SPDX-License-Identifier: Apache-2.0
//! `[filter_scheduler] weight_classes`: nova class names, dotted paths, and
//! `nova.scheduler.weights.all_weighers`.

use super::build_failure_weigher::BuildFailureWeigher;
use super::cpu_weigher::CPUWeigher;
use super::cross_cell_weigher::CrossCellWeigher;
use super::disk_weigher::DiskWeigher;
use super::hypervisor_version_weigher::HypervisorVersionWeigher;
use super::image_properties_weigher::ImagePropertiesWeigher;
use super::io_ops_weigher::IoOpsWeigher;
use super::metrics_weigher::MetricsWeigher;
use super::num_instances_weigher::NumInstancesWeigher;
use super::pci_weigher::PCIWeigher;
use super::ram_weigher::RAMWeigher;
use super::server_group_soft_affinity_weigher::ServerGroupSoftAffinityWeigher;
use super::server_group_soft_anti_affinity_weigher::ServerGroupSoftAntiAffinityWeigher;
use super::{CustomWeighers, HostWeigher, WeigherPipeline};
use crate::release::{Behaviour, NovaSeries};

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
    /// `[filter_scheduler] image_props_weight_multiplier` (0.0 disables the weigher).
    pub image_props_weight_multiplier: f64,
    /// `[filter_scheduler] image_props_weight_setting` (`name=ratio` entries).
    pub image_props_weight_setting: Vec<String>,
    /// `[metrics] weight_setting` (`name=ratio` entries).
    pub metrics_weight_setting: Vec<String>,
    /// `[metrics] weight_multiplier`.
    pub metrics_weight_multiplier: f64,
    /// `[metrics] required`.
    pub metrics_required: bool,
    /// `[metrics] weight_of_unavailable`.
    pub metrics_weight_of_unavailable: f64,
    /// The nova release whose weighers these are: an older one lacks some.
    pub release: NovaSeries,
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
            image_props_weight_setting: Vec::new(),
            metrics_weight_setting: Vec::new(),
            metrics_weight_multiplier: 1.0,
            metrics_required: true,
            metrics_weight_of_unavailable: -10000.0,
            release: NovaSeries::NEWEST,
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
#[error("unknown weigher(s) in [filter_scheduler] weight_classes: {}", .unknown.join(", "))]
pub struct UnknownWeighers {
    pub unknown: Vec<String>,
}

type Factory = fn(&WeigherConfig) -> Box<dyn HostWeigher>;

/// Sorted by name; one line per weigher.
const REGISTRY: &[(&str, Factory)] = &[
    (BuildFailureWeigher::NAME, |c| {
        Box::new(BuildFailureWeigher {
            multiplier: c.build_failure_weight_multiplier,
        })
    }),
    (CPUWeigher::NAME, |c| {
        Box::new(CPUWeigher {
            multiplier: c.cpu_weight_multiplier,
        })
    }),
    (CrossCellWeigher::NAME, |c| {
        Box::new(CrossCellWeigher {
            multiplier: c.cross_cell_move_weight_multiplier,
        })
    }),
    (DiskWeigher::NAME, |c| {
        Box::new(DiskWeigher {
            multiplier: c.disk_weight_multiplier,
        })
    }),
    (HypervisorVersionWeigher::NAME, |c| {
        Box::new(HypervisorVersionWeigher {
            multiplier: c.hypervisor_version_weight_multiplier,
        })
    }),
    // Kept even when it weighs every host 0 (multiplier 0.0): nova still multiplies
    // those zeros by each host's multiplier, and an aggregate override of `inf` or
    // `nan` then turns the sum into NaN. The same holds for MetricsWeigher.
    (ImagePropertiesWeigher::NAME, |c| {
        Box::new(ImagePropertiesWeigher::new(
            c.image_props_weight_multiplier,
            &c.image_props_weight_setting,
        ))
    }),
    (IoOpsWeigher::NAME, |c| {
        Box::new(IoOpsWeigher {
            multiplier: c.io_ops_weight_multiplier,
        })
    }),
    (MetricsWeigher::NAME, |c| {
        Box::new(MetricsWeigher::new(
            &c.metrics_weight_setting,
            c.metrics_weight_multiplier,
            c.metrics_required,
            c.metrics_weight_of_unavailable,
        ))
    }),
    (NumInstancesWeigher::NAME, |c| {
        Box::new(NumInstancesWeigher {
            multiplier: c.num_instances_weight_multiplier,
        })
    }),
    (PCIWeigher::NAME, |c| {
        Box::new(PCIWeigher {
            multiplier: c.pci_weight_multiplier,
        })
    }),
    (RAMWeigher::NAME, |c| {
        Box::new(RAMWeigher {
            multiplier: c.ram_weight_multiplier,
        })
    }),
    (ServerGroupSoftAffinityWeigher::NAME, |c| {
        Box::new(ServerGroupSoftAffinityWeigher {
            multiplier: c.soft_affinity_weight_multiplier,
        })
    }),
    (ServerGroupSoftAntiAffinityWeigher::NAME, |c| {
        Box::new(ServerGroupSoftAntiAffinityWeigher {
            multiplier: c.soft_anti_affinity_weight_multiplier,
        })
    }),
];

/// Whether `release`'s nova has the weigher `name` (nova 29 and 30 have no
/// ImagePropertiesWeigher: their loader fails on the class, their `all_weighers` lacks it).
pub fn in_release(name: &str, release: NovaSeries) -> bool {
    name != ImagePropertiesWeigher::NAME || release.has(Behaviour::ImagePropertiesWeigher)
}

fn build_one(name: &str, c: &WeigherConfig) -> Option<Box<dyn HostWeigher>> {
    if !in_release(name, c.release) {
        return None;
    }
    REGISTRY
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, factory)| factory(c))
}

/// Builds the pipeline from `weight_classes`.
pub fn build_pipeline(
    weight_classes: &[String],
    config: &WeigherConfig,
) -> Result<WeigherPipeline, UnknownWeighers> {
    build_pipeline_with(weight_classes, config, None)
}

/// [`build_pipeline`] with an operator's classes beside nova's, in the order the
/// entries name them (the order nova sums the weights in).
pub fn build_pipeline_with(
    weight_classes: &[String],
    config: &WeigherConfig,
    custom: Option<&dyn CustomWeighers>,
) -> Result<WeigherPipeline, UnknownWeighers> {
    // An entry is nova's weigher names, or an operator's classes already built.
    enum Named<'a> {
        Nova(String, &'a str),
        Custom(Vec<Box<dyn HostWeigher>>),
    }
    let mut names: Vec<Named<'_>> = Vec::new();
    let mut errors = UnknownWeighers {
        unknown: Vec::new(),
    };
    for entry in weight_classes {
        let entry = entry.trim();
        if let Some(built) = custom.and_then(|c| c.build(entry)) {
            match built {
                Ok(weighers) => names.push(Named::Custom(weighers)),
                Err(why) => errors.unknown.push(why),
            }
        } else if entry == ALL_WEIGHERS_PATH {
            names.extend(
                ALL_WEIGHERS
                    .iter()
                    .filter(|n| in_release(n, config.release))
                    .map(|n| Named::Nova(entry.to_string(), n)),
            );
        } else {
            names.push(Named::Nova(
                entry.to_string(),
                entry.rsplit('.').next().unwrap_or(entry),
            ));
        }
    }
    let mut weighers = Vec::new();
    for named in names {
        let (entry, name) = match named {
            Named::Custom(built) => {
                weighers.extend(built);
                continue;
            }
            Named::Nova(entry, name) => (entry, name),
        };
        match build_one(name, config) {
            Some(w) => weighers.push(w),
            None if REGISTRY.iter().any(|(n, _)| *n == name) => errors
                .unknown
                .push(format!("{entry} (not in {})", config.release)),
            None => errors.unknown.push(entry),
        }
    }
    if errors.unknown.is_empty() {
        Ok(WeigherPipeline::new(weighers))
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_sorted_without_duplicates_and_holds_all_weighers() {
        let names: Vec<_> = REGISTRY.iter().map(|(n, _)| *n).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names, sorted);
        for n in ALL_WEIGHERS {
            assert!(
                names.contains(n),
                "{n} is in all_weighers but not registered"
            );
        }
        for (n, factory) in REGISTRY {
            assert_eq!(factory(&WeigherConfig::default()).name(), *n);
        }
    }

    #[test]
    fn all_weighers_expands_in_nova_order() {
        let p = build_pipeline(&[ALL_WEIGHERS_PATH.into()], &WeigherConfig::default())
            .expect("pipeline");
        assert_eq!(
            p.names(),
            vec![
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
            ]
        );
        assert_eq!(p.names(), ALL_WEIGHERS);
    }

    #[test]
    fn nova_29_and_30_have_no_image_properties_weigher() {
        for release in [NovaSeries::V2024_1, NovaSeries::V2024_2] {
            let config = WeigherConfig {
                release,
                ..WeigherConfig::default()
            };
            let all = build_pipeline(&[ALL_WEIGHERS_PATH.into()], &config).expect("pipeline");
            let expected: Vec<&str> = ALL_WEIGHERS
                .iter()
                .copied()
                .filter(|n| *n != "ImagePropertiesWeigher")
                .collect();
            assert_eq!(all.names(), expected);
            let err = build_pipeline(&["ImagePropertiesWeigher".into()], &config)
                .expect_err("not in that release");
            assert_eq!(
                err.unknown,
                vec![format!("ImagePropertiesWeigher (not in {release})")]
            );
        }
        let config = WeigherConfig {
            release: NovaSeries::V2025_1,
            ..WeigherConfig::default()
        };
        assert!(build_pipeline(&["ImagePropertiesWeigher".into()], &config).is_ok());
    }

    #[test]
    fn dotted_names_and_errors() {
        let p = build_pipeline(
            &["nova.scheduler.weights.ram.RAMWeigher".into()],
            &WeigherConfig::default(),
        )
        .expect("ok");
        assert_eq!(p.names(), vec!["RAMWeigher"]);
        let err = build_pipeline(
            &[
                "Bogus".into(),
                "nova.scheduler.weights.metrics.MetricsWeigher".into(),
                "x.Nope".into(),
            ],
            &WeigherConfig::default(),
        )
        .expect_err("errors");
        assert_eq!(err.unknown, vec!["Bogus", "x.Nope"]);
    }
}
