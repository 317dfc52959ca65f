// SPDX-License-Identifier: Apache-2.0
//! `ImagePropertiesWeigher`: hosts whose instances were booted from images sharing
//! the request image's properties win (positive multiplier packs, negative spreads).
//!
//! Raw weight: for every `(property, str(value))` pair of the request image that at
//! least one instance on the host shares, the number of such instances, times the
//! property's ratio from `image_props_weight_setting` when that option is set (0 for
//! properties it does not name). Disabled (0 for every host, no data read) while the
//! *config* multiplier is 0.0, whatever the aggregates say.

use super::aggregate_multiplier::MultiplierSetting;
use super::image_props::{count_pairs, request_props};
use super::{HostWeigher, RawDependence, WeighError};
use crate::filters::metrics_filter::parse_options;
use crate::model::{HostState, RequestSpec};
use crate::py;
use std::collections::BTreeMap;
use tracing::warn;

pub struct ImagePropertiesWeigher {
    /// `[filter_scheduler] image_props_weight_multiplier` (0.0).
    multiplier: f64,
    /// `image_props_weight_setting` as a dict (a later duplicate wins).
    setting: BTreeMap<String, f64>,
}

impl ImagePropertiesWeigher {
    pub const NAME: &'static str = "ImagePropertiesWeigher";

    pub fn new(multiplier: f64, weight_setting: &[String]) -> Self {
        let setting = parse_options(
            weight_setting,
            '=',
            "filter_scheduler.image_props_weight_setting",
            |v| py::float::float(v).ok(),
        )
        .into_iter()
        .collect();
        ImagePropertiesWeigher {
            multiplier,
            setting,
        }
    }

    /// True while the weigher reads no instance data (nova's config gate); the
    /// state loader then need not load `HostState::instance_system_metadata`.
    pub fn is_disabled(&self) -> bool {
        self.multiplier == 0.0
    }
}

impl HostWeigher for ImagePropertiesWeigher {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn stable_within_request(&self) -> bool {
        true
    }

    /// Disabled by its config multiplier: 0.0 for every host.
    fn raw_dependence(&self, _spec: &RequestSpec) -> RawDependence {
        if self.is_disabled() {
            RawDependence::SameForEveryHost(0.0)
        } else {
            RawDependence::Request
        }
    }

    fn weigh(&self, host: &HostState, spec: &RequestSpec) -> Result<f64, WeighError> {
        if self.is_disabled() {
            return Ok(0.0);
        }
        let Some(sysmeta) = &host.instance_system_metadata else {
            // nova returns 0.0 when it cannot reach the host's cell; here the
            // loader did not provide the instances' image data.
            warn!(host = %host.host, "ImagePropertiesWeigher: no instance image data loaded for this host; weight 0");
            return Ok(0.0);
        };
        let requested = spec
            .image
            .as_ref()
            .map(|i| request_props(&i.properties))
            .unwrap_or_default();
        // Instances with no metadata rows (or unknown to the database) add nothing.
        let counts = count_pairs(
            host.instances
                .iter()
                .filter_map(|uuid| sysmeta.get(uuid))
                .map(Vec::as_slice),
        )
        .map_err(|e| WeighError {
            class: "ValueError",
            message: e.message,
        })?;
        let mut seen = std::collections::BTreeSet::new();
        let mut weight = 0.0;
        for pair in requested {
            if !seen.insert(pair.clone()) {
                continue;
            }
            let Some(&count) = counts.get(&pair) else {
                continue;
            };
            weight += if self.setting.is_empty() {
                count as f64
            } else {
                self.setting.get(&pair.0).copied().unwrap_or(0.0) * count as f64
            };
        }
        Ok(weight)
    }

    fn multiplier_setting(&self) -> MultiplierSetting {
        MultiplierSetting::new("image_props_weight_multiplier", self.multiplier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ImageMeta;
    use crate::weighers::WeigherPipeline;
    use serde_json::json;
    use std::sync::Arc;

    /// nova's test_weights_image_props hosts: host1 no instances, host2 {win, pc},
    /// host3 {lin} + {lin, pc}, host4 {lin}.
    fn hosts() -> Vec<HostState> {
        let inst = |distro: &str, machine: Option<&str>| {
            let mut rows = vec![("image_os_distro".to_string(), distro.to_string())];
            if let Some(m) = machine {
                rows.push(("image_hw_machine_type".to_string(), m.to_string()));
            }
            rows
        };
        let specs: [Vec<Vec<(String, String)>>; 4] = [
            vec![],
            vec![inst("windows", Some("pc"))],
            vec![inst("linux", None), inst("linux", Some("pc"))],
            vec![inst("linux", None)],
        ];
        specs
            .into_iter()
            .enumerate()
            .map(|(h, instances)| {
                let uuids: Vec<String> = (0..instances.len())
                    .map(|i| format!("00000000-0000-0000-0000-0000000{h}000{i}"))
                    .collect();
                HostState {
                    host: format!("host{}", h + 1).into(),
                    instances: Arc::new(uuids.iter().cloned().collect()),
                    instance_system_metadata: Some(Arc::new(
                        uuids.into_iter().zip(instances).collect(),
                    )),
                    ..Default::default()
                }
            })
            .collect()
    }

    fn weigh(setting: &[&str], image: serde_json::Value) -> Vec<(String, f64)> {
        let setting: Vec<String> = setting.iter().map(|s| s.to_string()).collect();
        let p = WeigherPipeline::new(vec![Box::new(ImagePropertiesWeigher::new(1.0, &setting))]);
        let spec = RequestSpec {
            image: Some(ImageMeta {
                properties: image.as_object().cloned().unwrap_or_default(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let hosts = hosts();
        p.weigh(&hosts, &[0, 1, 2, 3], &spec)
            .expect("weigh")
            .iter()
            .map(|w| (hosts[w.index].host.to_string(), w.weight))
            .collect()
    }

    #[test]
    fn nova_vectors() {
        let third = 1.0 / 3.0;
        let lin_pc = json!({"os_distro": "linux", "hw_machine_type": "pc"});
        assert_eq!(
            weigh(&[], lin_pc.clone()),
            vec![
                ("host3".into(), 1.0),
                ("host2".into(), third),
                ("host4".into(), third),
                ("host1".into(), 0.0)
            ]
        );
        let w = weigh(&["os_distro=1", "hw_machine_type=0"], lin_pc);
        assert_eq!(w[0], ("host3".into(), 1.0));
        assert_eq!(w[1], ("host4".into(), 0.5));
        let w = weigh(&[], json!({"hw_machine_type": "pc"}));
        assert_eq!(w[0], ("host2".into(), 1.0));
        assert_eq!(w[1], ("host3".into(), 1.0));
        let w = weigh(&[], json!({"os_distro": "linux"}));
        assert_eq!(w[0], ("host3".into(), 1.0));
        assert_eq!(w[1], ("host4".into(), 0.5));
    }

    #[test]
    fn disabled_by_config_multiplier_alone() {
        let w = ImagePropertiesWeigher::new(0.0, &[]);
        assert!(w.is_disabled());
        assert_eq!(w.weigh(&hosts()[2], &RequestSpec::default()), Ok(0.0));
    }
}
