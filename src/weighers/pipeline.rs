// SPDX-License-Identifier: Apache-2.0
//! nova's `BaseWeightHandler.get_weighed_objects`.

use super::normalize::normalize;
use super::{HostWeigher, WeighError};
use crate::model::{HostState, RequestSpec};
use tracing::{debug, enabled, Level};

/// A candidate host (index into the request's host list) and its summed weight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WeighedHost {
    pub index: usize,
    pub weight: f64,
}

/// The enabled weighers, in nova's loader order.
pub struct WeigherPipeline {
    weighers: Vec<Box<dyn HostWeigher>>,
}

impl std::fmt::Debug for WeigherPipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl WeigherPipeline {
    pub fn new(weighers: Vec<Box<dyn HostWeigher>>) -> Self {
        WeigherPipeline { weighers }
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.weighers.iter().map(|w| w.name()).collect()
    }

    /// Weighs `candidates` and returns them sorted by weight, descending and stable
    /// (equal weights keep the input order, as Python's `sorted(reverse=True)`).
    /// With one host or none, no weigher runs and weights stay 0.0.
    pub fn weigh(
        &self,
        hosts: &[HostState],
        candidates: &[usize],
        spec: &RequestSpec,
    ) -> Result<Vec<WeighedHost>, WeighError> {
        let mut weighed: Vec<WeighedHost> = candidates
            .iter()
            .map(|&index| WeighedHost { index, weight: 0.0 })
            .collect();
        if weighed.len() <= 1 {
            return Ok(weighed);
        }
        let explain = enabled!(Level::DEBUG);
        let mut raw = Vec::with_capacity(weighed.len());
        for weigher in &self.weighers {
            raw.clear();
            for w in &weighed {
                let mut value = weigher.weigh(&hosts[w.index], spec)?;
                // nova: "don't let the weight go beyond the defined max/min".
                if let Some(min) = weigher.minval() {
                    value = value.max(min);
                }
                if let Some(max) = weigher.maxval() {
                    value = value.min(max);
                }
                raw.push(value);
            }
            let normalized = normalize(&raw, weigher.minval(), weigher.maxval());
            for (i, w) in weighed.iter_mut().enumerate() {
                let multiplier = weigher.multiplier(&hosts[w.index]);
                w.weight += multiplier * normalized[i];
                if explain {
                    let h = &hosts[w.index];
                    debug!(weigher = weigher.name(), host = %h.host, node = %h.nodename, raw = raw[i],
                           normalized = normalized[i], multiplier, score = multiplier * normalized[i], "weighed");
                }
            }
        }
        weighed.sort_by(|a, b| {
            b.weight
                .partial_cmp(&a.weight)
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        Ok(weighed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weighers::cpu_weigher::CPUWeigher;
    use crate::weighers::io_ops_weigher::IoOpsWeigher;
    use crate::weighers::ram_weigher::RAMWeigher;

    fn ram_hosts(free: &[i64]) -> Vec<HostState> {
        free.iter()
            .enumerate()
            .map(|(i, f)| HostState {
                host: format!("host{}", i + 1),
                free_ram_mb: *f,
                ..Default::default()
            })
            .collect()
    }

    fn order(p: &WeigherPipeline, hosts: &[HostState]) -> Vec<(usize, f64)> {
        let all: Vec<usize> = (0..hosts.len()).collect();
        p.weigh(hosts, &all, &RequestSpec::default())
            .expect("weigh")
            .iter()
            .map(|w| (w.index, w.weight))
            .collect()
    }

    /// nova test_weights_ram: 512/1024/3072/8192 → host4 1.0; a −512 host is clamped to 0 and sorts last.
    #[test]
    fn ram_vectors() {
        let p = WeigherPipeline::new(vec![Box::new(RAMWeigher { multiplier: 1.0 })]);
        let got = order(&p, &ram_hosts(&[512, 1024, 3072, 8192]));
        assert_eq!(got[0], (3, 1.0));
        let got = order(&p, &ram_hosts(&[512, 1024, 3072, 8192, -512]));
        assert_eq!(got[0], (3, 1.0));
        assert_eq!(got[4], (4, 0.0));
        let p2 = WeigherPipeline::new(vec![Box::new(RAMWeigher { multiplier: 2.0 })]);
        assert_eq!(order(&p2, &ram_hosts(&[512, 8192]))[0], (1, 2.0));
    }

    /// nova test_weights_cpu: (total, used, ratio) 8/8/1, 4/2/1, 6/0/1, 8/0/2 → free 0,2,6,16.
    #[test]
    fn cpu_vectors() {
        let hosts: Vec<HostState> = [(8, 8, 1.0), (4, 2, 1.0), (6, 0, 1.0), (8, 0, 2.0)]
            .iter()
            .map(|(t, u, r)| HostState {
                vcpus_total: *t,
                vcpus_used: *u,
                cpu_allocation_ratio: *r,
                ..Default::default()
            })
            .collect();
        let p = WeigherPipeline::new(vec![Box::new(CPUWeigher { multiplier: 1.0 })]);
        assert_eq!(order(&p, &hosts)[0], (3, 1.0));
        let neg = WeigherPipeline::new(vec![Box::new(CPUWeigher { multiplier: -1.0 })]);
        assert_eq!(order(&neg, &hosts)[0].0, 0);
    }

    /// The facts sheet's combined example: RAM 1024/2048/4096 and io_ops 0/2/4 with
    /// the default −1 → A 0.25, B 0.0, C 0.0; the B/C tie keeps input order.
    #[test]
    fn combined_ram_and_io_ops_tie_keeps_input_order() {
        let hosts: Vec<HostState> = [(1024, 0), (2048, 2), (4096, 4)]
            .iter()
            .map(|(r, io)| HostState {
                free_ram_mb: *r,
                num_io_ops: *io,
                ..Default::default()
            })
            .collect();
        let p = WeigherPipeline::new(vec![
            Box::new(RAMWeigher { multiplier: 1.0 }),
            Box::new(IoOpsWeigher { multiplier: -1.0 }),
        ]);
        let got = order(&p, &hosts);
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(
            (got[0].1 - 0.25).abs() < 1e-12 && got[1].1.abs() < 1e-12 && got[2].1.abs() < 1e-12
        );
    }

    #[test]
    fn single_host_is_not_weighed() {
        let p = WeigherPipeline::new(vec![Box::new(RAMWeigher { multiplier: 1.0 })]);
        assert_eq!(order(&p, &ram_hosts(&[4096])), vec![(0, 0.0)]);
    }
}
