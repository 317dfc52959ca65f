// SPDX-License-Identifier: Apache-2.0
//! nova's `BaseWeightHandler.get_weighed_objects`.

use super::aggregate_multiplier::{may_override, MULTIPLIER_KEY_SUFFIX};
use super::normalize::{bounds as normalize_bounds, normalize, normalize_one};
use super::{HostWeigher, WeighError};
use crate::model::host_state::positions_in_memory_order;
use crate::model::{HostState, RequestSpec};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tracing::{debug, enabled, Level};

/// See [`WeigherPipeline::keys_suffixed`].
pub(crate) fn keys_suffixed(weighers: &[Box<dyn HostWeigher>]) -> bool {
    weighers
        .iter()
        .all(|w| w.multiplier_setting().key.ends_with(MULTIPLIER_KEY_SUFFIX))
}

/// A candidate host (index into the request's host list) and its summed weight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WeighedHost {
    pub index: usize,
    pub weight: f64,
}

/// What one weigher gave one host: nova's three debug lines ("raw weights",
/// "normalized weights", "score (multiplier * weight)") as numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WeigherScore {
    /// nova's class name of the weigher.
    pub weigher: &'static str,
    /// `_weigh_object`, after the `minval`/`maxval` clamp.
    pub raw: f64,
    /// In [0, 1] over this request's candidate list.
    pub normalized: f64,
    /// Config value or the host's aggregate override.
    pub multiplier: f64,
    /// `multiplier * normalized`: what this weigher added to the host's weight.
    pub contribution: f64,
}

/// One candidate's weight and how each weigher made it up.
#[derive(Debug, Clone, PartialEq)]
pub struct HostWeighing {
    /// Index into the request's host list.
    pub index: usize,
    pub host: String,
    pub nodename: String,
    /// Sum of the contributions (the sort key).
    pub weight: f64,
    /// One entry per weigher, in pipeline order; empty when there was at most one
    /// candidate (nova then runs no weigher).
    pub scores: Vec<WeigherScore>,
}

/// The weighing of one request, hosts in the final (descending) order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WeighingExplanation {
    pub weighers: Vec<&'static str>,
    pub hosts: Vec<HostWeighing>,
}

/// Per-host raw weights, multipliers, contributions and sums kept between the
/// instances of one request (see [`WeigherPipeline::weigh_cached`]); start with
/// `default()`.
#[derive(Debug, Default)]
pub struct WeighCache {
    hosts: usize,
    weighers: usize,
    known: Vec<bool>,
    /// `raw[k * hosts + host]`, clamped to the weigher's bounds.
    raw: Vec<f64>,
    multiplier: Vec<f64>,
    /// `multiplier * normalized` as of the last call that had the host.
    contribution: Vec<f64>,
    total: Vec<f64>,
    /// `mark[host] == generation`: the host is a candidate of the current call.
    mark: Vec<u32>,
    generation: u32,
    previous: Option<PreviousWeighing>,
    /// A raw weight was NaN.
    nan: bool,
}

/// The candidate list of the previous call and each weigher's `(lo, hi)`.
#[derive(Debug)]
struct PreviousWeighing {
    list: Vec<usize>,
    bounds: Vec<(f64, f64)>,
}

/// The enabled weighers, in nova's loader order.
pub struct WeigherPipeline {
    /// Shared with the weigh indexes built for this pipeline (they re-weigh the
    /// host states that change).
    weighers: Arc<Vec<Box<dyn HostWeigher>>>,
    /// Tells the pipelines of one process apart (a weigh index is built for one).
    id: u64,
    /// Dropped with the pipeline: its weigh indexes see it gone (see [`Self::liveness`]).
    alive: Arc<()>,
}

impl std::fmt::Debug for WeigherPipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl WeigherPipeline {
    pub fn new(weighers: Vec<Box<dyn HostWeigher>>) -> Self {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        WeigherPipeline {
            weighers: Arc::new(weighers),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            alive: Arc::new(()),
        }
    }

    /// Upgradable while this pipeline exists.
    pub(crate) fn liveness(&self) -> std::sync::Weak<()> {
        Arc::downgrade(&self.alive)
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn weighers(&self) -> &Arc<Vec<Box<dyn HostWeigher>>> {
        &self.weighers
    }

    /// True when every weigher's multiplier key ends with `_weight_multiplier`:
    /// a host none of whose aggregates carries such a key then takes every
    /// weigher's config value (see [`may_override`]).
    pub(crate) fn keys_suffixed(&self) -> bool {
        keys_suffixed(&self.weighers)
    }

    /// True when a weigher weighs the list at once (an operator's Python class).
    pub fn weighs_any_at_once(&self) -> bool {
        self.weighers.iter().any(|w| w.weighs_all_at_once())
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
        self.run(hosts, candidates, spec, None)
    }

    /// [`weigh`](Self::weigh), also returning every weigher's raw, normalized and
    /// weighted value per host.
    pub fn weigh_explained(
        &self,
        hosts: &[HostState],
        candidates: &[usize],
        spec: &RequestSpec,
    ) -> Result<(Vec<WeighedHost>, WeighingExplanation), WeighError> {
        let mut scores: Vec<Vec<WeigherScore>> = vec![Vec::new(); candidates.len()];
        let weighed = self.run(hosts, candidates, spec, Some(&mut scores))?;
        // `run` sorted the hosts; `scores` is still in candidate order.
        let mut by_index: BTreeMap<usize, Vec<WeigherScore>> = BTreeMap::new();
        for (&index, s) in candidates.iter().zip(scores) {
            by_index.insert(index, s);
        }
        let explanation = WeighingExplanation {
            weighers: self.names(),
            hosts: weighed
                .iter()
                .map(|w| HostWeighing {
                    index: w.index,
                    host: hosts[w.index].host.to_string(),
                    nodename: hosts[w.index].nodename.to_string(),
                    weight: w.weight,
                    scores: by_index.remove(&w.index).unwrap_or_default(),
                })
                .collect(),
        };
        Ok((weighed, explanation))
    }

    fn run(
        &self,
        hosts: &[HostState],
        candidates: &[usize],
        spec: &RequestSpec,
        mut explain: Option<&mut Vec<Vec<WeigherScore>>>,
    ) -> Result<Vec<WeighedHost>, WeighError> {
        let mut weighed: Vec<WeighedHost> = candidates
            .iter()
            .map(|&index| WeighedHost { index, weight: 0.0 })
            .collect();
        if weighed.len() <= 1 {
            return Ok(weighed);
        }
        let log = enabled!(Level::DEBUG);
        // Hosts whose aggregates carry no multiplier key take every weigher's config
        // value; only the others are looked up per weigher (nova looks up all).
        let keys_suffixed = self.keys_suffixed();
        // Host states are read in memory order (see `positions_in_memory_order`);
        // every result is stored by position.
        let memory_order = positions_in_memory_order(candidates);
        let mut overridable = vec![true; weighed.len()];
        if keys_suffixed {
            for &i in &memory_order {
                overridable[i] = may_override(&hosts[weighed[i].index]);
            }
        }
        // Raw weights host by host (each host's state is read once, not once per
        // weigher), stored weigher by weigher: `all_raw[k * n + i]`.
        let n = weighed.len();
        let mut bounds: Vec<(Option<f64>, Option<f64>)> = self
            .weighers
            .iter()
            .map(|w| (w.minval(), w.maxval()))
            .collect();
        let mut all_raw = vec![0.0; self.weighers.len() * n];
        // Weighers that weigh the list at once, with their multipliers per host.
        let mut at_once: Vec<Option<Vec<f64>>> = vec![None; self.weighers.len()];
        for (k, weigher) in self.weighers.iter().enumerate() {
            if weigher.weighs_all_at_once() {
                let listed: Vec<&HostState> = weighed.iter().map(|w| &hosts[w.index]).collect();
                let all = weigher.weigh_all(&listed, spec)?;
                if all.raw.len() != n || all.multipliers.len() != n {
                    return Err(WeighError {
                        class: "ValueError",
                        message: format!(
                            "{} weighed {} of {n} hosts ({} multipliers)",
                            weigher.name(),
                            all.raw.len(),
                            all.multipliers.len()
                        ),
                    });
                }
                all_raw[k * n..(k + 1) * n].copy_from_slice(&all.raw);
                bounds[k] = (all.minval, all.maxval);
                at_once[k] = Some(all.multipliers);
            }
        }
        for &i in &memory_order {
            let host = &hosts[weighed[i].index];
            for (k, weigher) in self.weighers.iter().enumerate() {
                if at_once[k].is_some() {
                    continue;
                }
                let mut value = match weigher.weigh(host, spec) {
                    Ok(v) => v,
                    Err(e) => return Err(self.first_error(hosts, &weighed, spec).unwrap_or(e)),
                };
                // nova: "don't let the weight go beyond the defined max/min".
                let (minval, maxval) = bounds[k];
                if let Some(min) = minval {
                    value = value.max(min);
                }
                if let Some(max) = maxval {
                    value = value.min(max);
                }
                all_raw[k * n + i] = value;
            }
        }
        for (k, weigher) in self.weighers.iter().enumerate() {
            let (minval, maxval) = bounds[k];
            let setting = weigher.multiplier_setting();
            let raw = &all_raw[k * n..(k + 1) * n];
            let normalized = normalize(raw, minval, maxval);
            let mut multipliers = Vec::new();
            for (i, w) in weighed.iter_mut().enumerate() {
                let multiplier = if let Some(given) = &at_once[k] {
                    given[i]
                } else if overridable[i] {
                    weigher.multiplier(&hosts[w.index])
                } else {
                    setting.without_override()
                };
                let contribution = multiplier * normalized[i];
                w.weight += contribution;
                if let Some(scores) = explain.as_deref_mut() {
                    scores[i].push(WeigherScore {
                        weigher: weigher.name(),
                        raw: raw[i],
                        normalized: normalized[i],
                        multiplier,
                        contribution,
                    });
                }
                if log {
                    multipliers.push(multiplier);
                }
            }
            if log {
                self.log_weigher(
                    weigher.name(),
                    hosts,
                    &weighed,
                    raw,
                    &normalized,
                    &multipliers,
                );
            }
        }
        weighed.sort_by(|a, b| {
            b.weight
                .partial_cmp(&a.weight)
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        Ok(weighed)
    }

    /// [`weigh`](Self::weigh) for the instances of one request, keeping every
    /// host's raw weights (from the weighers that are
    /// [stable within the request](HostWeigher::stable_within_request)),
    /// multipliers, contributions and sums in `cache` from one call to the next.
    /// `consumed` is the host whose state changed since the previous call with
    /// this cache; its weights are computed again.
    ///
    /// The result is bit-identical to [`weigh`](Self::weigh): normalization bounds
    /// are those of the current candidate list (found again by a scan whenever a
    /// host that left the list, or the consumed host, held a bound); a weigher's
    /// contributions are recomputed for every candidate when its bounds moved,
    /// else only for the consumed host; a host's sum is redone (adding the
    /// contributions in weigher order, as `weigh` does) unless none of its
    /// contributions changed. NaN weights anywhere turn all of this off (Python's
    /// `min`/`max` then depend on the order) and every column is redone.
    pub fn weigh_cached(
        &self,
        hosts: &[HostState],
        candidates: &[usize],
        spec: &RequestSpec,
        cache: &mut WeighCache,
        consumed: Option<usize>,
    ) -> Result<Vec<WeighedHost>, WeighError> {
        let nk = self.weighers.len();
        let stride = hosts.len();
        if cache.hosts != stride || cache.weighers != nk {
            *cache = WeighCache {
                hosts: stride,
                weighers: nk,
                known: vec![false; stride],
                raw: vec![0.0; nk * stride],
                multiplier: vec![0.0; nk * stride],
                contribution: vec![0.0; nk * stride],
                total: vec![0.0; stride],
                mark: vec![0; stride],
                generation: 0,
                previous: None,
                nan: false,
            };
        }
        // The consumed host's raw weights before this call (to tell whether it held
        // a normalization bound).
        let mut consumed_old: Option<(usize, Vec<f64>)> = None;
        if let Some(c) = consumed {
            if c < stride && cache.known[c] {
                cache.known[c] = false;
                consumed_old = Some((c, (0..nk).map(|k| cache.raw[k * stride + c]).collect()));
            }
        }
        if candidates.len() <= 1 || enabled!(Level::DEBUG) || self.weighs_any_at_once() {
            // nova's debug lines come from the plain run, as does a weigher that
            // weighs the list at once; nothing is carried over.
            cache.previous = None;
            return self.run(hosts, candidates, spec, None);
        }
        let keys_suffixed = self.keys_suffixed();
        let bounds: Vec<(Option<f64>, Option<f64>)> = self
            .weighers
            .iter()
            .map(|w| (w.minval(), w.maxval()))
            .collect();
        let stable: Vec<bool> = self
            .weighers
            .iter()
            .map(|w| w.stable_within_request())
            .collect();
        let all_stable = stable.iter().all(|&s| s);
        let mut weighed: Vec<WeighedHost> = candidates
            .iter()
            .map(|&index| WeighedHost { index, weight: 0.0 })
            .collect();
        // The first call reads every host state, in memory order (see `run`); later
        // ones only the few not yet known.
        let visit = if cache.previous.is_some() {
            (0..candidates.len()).collect()
        } else {
            positions_in_memory_order(candidates)
        };
        // Hosts whose raw weights were (re)computed by this call.
        let mut fresh: Vec<usize> = Vec::new();
        for p in visit {
            let index = candidates[p];
            let known = cache.known[index];
            if known && all_stable {
                continue;
            }
            let host = &hosts[index];
            for (k, weigher) in self.weighers.iter().enumerate() {
                if known && stable[k] {
                    continue;
                }
                let mut value = match weigher.weigh(host, spec) {
                    Ok(v) => v,
                    Err(e) => {
                        cache.previous = None;
                        return Err(self.first_error(hosts, &weighed, spec).unwrap_or(e));
                    }
                };
                let (minval, maxval) = bounds[k];
                if let Some(min) = minval {
                    value = value.max(min);
                }
                if let Some(max) = maxval {
                    value = value.min(max);
                }
                cache.nan |= value.is_nan();
                cache.raw[k * stride + index] = value;
            }
            if !known {
                let overridable = !keys_suffixed || may_override(host);
                for (k, weigher) in self.weighers.iter().enumerate() {
                    cache.multiplier[k * stride + index] = if overridable {
                        weigher.multiplier(host)
                    } else {
                        weigher.multiplier_setting().without_override()
                    };
                }
                cache.known[index] = true;
                fresh.push(index);
            }
        }
        // Mark the current candidates.
        cache.generation = cache.generation.wrapping_add(1);
        if cache.generation == 0 {
            cache.mark.iter_mut().for_each(|m| *m = 0);
            cache.generation = 1;
        }
        let generation = cache.generation;
        for &i in candidates {
            cache.mark[i] = generation;
        }
        // Carry over from the previous call only when the candidates are a subset of
        // its list, the only host re-weighed is the consumed one, every weigher is
        // stable and no weight is NaN.
        let previous = cache.previous.take();
        // The hosts of the previous list that are not candidates now.
        let mut leavers: Vec<usize> = Vec::new();
        let carry = previous.filter(|prev| {
            all_stable
                && !cache.nan
                && fresh
                    .iter()
                    .all(|&f| Some(f) == consumed_old.as_ref().map(|c| c.0))
                && candidates.len() <= prev.list.len()
                && {
                    leavers.extend(
                        prev.list
                            .iter()
                            .copied()
                            .filter(|&i| cache.mark[i] != generation),
                    );
                    prev.list.len() - leavers.len() == candidates.len()
                }
        });
        let mut lows_highs: Vec<(f64, f64)> = Vec::with_capacity(nk);
        let mut column_redone = vec![true; nk];
        let mut raw = Vec::new();
        for k in 0..nk {
            let (minval, maxval) = bounds[k];
            let column = &cache.raw[k * stride..(k + 1) * stride];
            // Bounds: carried over when no leaver held one, else a scan.
            let carried = carry.as_ref().and_then(|prev| {
                let (plo, phi) = prev.bounds[k];
                let mut held_lo = false;
                let mut held_hi = false;
                let mut check = |v: f64| {
                    held_lo |= minval.is_none() && v == plo;
                    held_hi |= maxval.is_none() && v == phi;
                };
                for &i in &leavers {
                    let v = match &consumed_old {
                        Some((c, old)) if *c == i => old[k],
                        _ => column[i],
                    };
                    check(v);
                }
                if let Some((c, old)) = &consumed_old {
                    if cache.mark[*c] == generation {
                        check(old[k]);
                    }
                }
                if held_lo || held_hi {
                    return None;
                }
                let (mut lo, mut hi) = (plo, phi);
                if let Some((c, _)) = &consumed_old {
                    if cache.mark[*c] == generation {
                        let v = column[*c];
                        if minval.is_none() && v < lo {
                            lo = v;
                        }
                        if maxval.is_none() && v > hi {
                            hi = v;
                        }
                    }
                }
                Some((lo, hi))
            });
            let (lo, hi) = match carried {
                Some(b) => b,
                None => {
                    raw.clear();
                    raw.extend(candidates.iter().map(|&i| column[i]));
                    normalize_bounds(&raw, minval, maxval)
                }
            };
            lows_highs.push((lo, hi));
            let same = carry.as_ref().is_some_and(|prev| {
                let (plo, phi) = prev.bounds[k];
                plo.to_bits() == lo.to_bits() && phi.to_bits() == hi.to_bits()
            });
            let multipliers = &cache.multiplier[k * stride..(k + 1) * stride];
            let contribution = &mut cache.contribution[k * stride..(k + 1) * stride];
            if same {
                column_redone[k] = false;
                if let Some((c, _)) = &consumed_old {
                    contribution[*c] = multipliers[*c] * normalize_one(column[*c], lo, hi);
                }
            } else {
                for &i in candidates {
                    contribution[i] = multipliers[i] * normalize_one(column[i], lo, hi);
                }
            }
        }
        let all_columns_kept = carry.is_some() && column_redone.iter().all(|&r| !r);
        for w in weighed.iter_mut() {
            let i = w.index;
            if all_columns_kept && consumed_old.as_ref().is_none_or(|c| c.0 != i) {
                w.weight = cache.total[i];
                continue;
            }
            let mut total = 0.0;
            for k in 0..nk {
                total += cache.contribution[k * stride + i];
            }
            cache.total[i] = total;
            w.weight = total;
        }
        cache.previous = Some(PreviousWeighing {
            list: candidates.to_vec(),
            bounds: lows_highs,
        });
        weighed.sort_by(|a, b| {
            b.weight
                .partial_cmp(&a.weight)
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        Ok(weighed)
    }

    /// The error nova raises: the first one weigher by weigher, host by host (the
    /// raw weights are computed host by host, which can meet another one first).
    fn first_error(
        &self,
        hosts: &[HostState],
        weighed: &[WeighedHost],
        spec: &RequestSpec,
    ) -> Option<WeighError> {
        self.weighers.iter().find_map(|weigher| {
            weighed
                .iter()
                .find_map(|w| weigher.weigh(&hosts[w.index], spec).err())
        })
    }

    /// nova's three debug lines per weigher, then one structured event per host.
    fn log_weigher(
        &self,
        name: &'static str,
        hosts: &[HostState],
        weighed: &[WeighedHost],
        raw: &[f64],
        normalized: &[f64],
        multipliers: &[f64],
    ) {
        let keyed = |values: &mut dyn Iterator<Item = String>| -> String {
            let parts: Vec<String> = weighed
                .iter()
                .zip(values)
                .map(|(w, v)| {
                    let h = &hosts[w.index];
                    format!("('{}', '{}'): {v}", h.host, h.nodename)
                })
                .collect();
            format!("{{{}}}", parts.join(", "))
        };
        debug!(
            "{name}: raw weights {}",
            keyed(&mut raw.iter().map(|v| v.to_string()))
        );
        debug!(
            "{name}: normalized weights {}",
            keyed(&mut normalized.iter().map(|v| v.to_string()))
        );
        debug!(
            "{name}: score (multiplier * weight) {}",
            keyed(
                &mut multipliers
                    .iter()
                    .zip(normalized)
                    .map(|(m, n)| format!("'{m} * {n}'"))
            )
        );
        for (i, w) in weighed.iter().enumerate() {
            let h = &hosts[w.index];
            debug!(weigher = name, host = %h.host, node = %h.nodename, raw = raw[i],
                   normalized = normalized[i], multiplier = multipliers[i],
                   contribution = multipliers[i] * normalized[i], "weighed");
        }
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
                host: format!("host{}", i + 1).into(),
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

    /// The worked example: free vCPUs 5,5,10,10,15,20,20,15,10,5 on ten hosts. nova's
    /// CPUWeigher (floor 0) gives 0.25,0.25,0.5,...; a weigher without a floor
    /// (HypervisorVersionWeigher, fed the same numbers) gives plain min/max
    /// 0,0,0.33,.... Same ranking, different weights; the explanation carries both.
    #[test]
    fn worked_example_through_the_pipeline_and_explanation() {
        use crate::weighers::hypervisor_version_weigher::HypervisorVersionWeigher;
        let free = [5, 5, 10, 10, 15, 20, 20, 15, 10, 5];
        let hosts: Vec<HostState> = free
            .iter()
            .enumerate()
            .map(|(i, f)| HostState {
                host: format!("host{}", i + 1).into(),
                nodename: format!("host{}", i + 1).into(),
                vcpus_total: *f,
                cpu_allocation_ratio: 1.0,
                hypervisor_version: Some(*f),
                ..Default::default()
            })
            .collect();
        let all: Vec<usize> = (0..hosts.len()).collect();
        let p = WeigherPipeline::new(vec![
            Box::new(CPUWeigher { multiplier: 1.0 }),
            Box::new(HypervisorVersionWeigher { multiplier: 2.0 }),
        ]);
        let (sorted, explained) = p
            .weigh_explained(&hosts, &all, &RequestSpec::default())
            .expect("weigh");
        let third = 1.0 / 3.0;
        let cpu = [0.25, 0.25, 0.5, 0.5, 0.75, 1.0, 1.0, 0.75, 0.5, 0.25];
        let plain = [
            0.0,
            0.0,
            third,
            third,
            2.0 * third,
            1.0,
            1.0,
            2.0 * third,
            third,
            0.0,
        ];
        for h in &explained.hosts {
            let [c, v] = [&h.scores[0], &h.scores[1]];
            assert_eq!(
                (c.weigher, v.weigher),
                ("CPUWeigher", "HypervisorVersionWeigher")
            );
            assert_eq!(c.raw, free[h.index] as f64);
            assert!((c.normalized - cpu[h.index]).abs() < 1e-12);
            assert!((v.normalized - plain[h.index]).abs() < 1e-12);
            assert_eq!((c.multiplier, v.multiplier), (1.0, 2.0));
            assert!((v.contribution - 2.0 * plain[h.index]).abs() < 1e-12);
            assert!((h.weight - c.contribution - v.contribution).abs() < 1e-12);
        }
        // host6, host7 first; then 15s (host5, host8), 10s, 5s, ties in input order.
        let order: Vec<usize> = sorted.iter().map(|w| w.index + 1).collect();
        assert_eq!(order, vec![6, 7, 5, 8, 3, 4, 9, 1, 2, 10]);
        assert_eq!(
            explained.hosts.iter().map(|h| h.index).collect::<Vec<_>>(),
            sorted.iter().map(|w| w.index).collect::<Vec<_>>()
        );
        assert_eq!(
            explained.weighers,
            vec!["CPUWeigher", "HypervisorVersionWeigher"]
        );
    }

    /// A single host is not weighed, so its explanation is empty.
    #[test]
    fn one_host_has_no_scores() {
        let p = WeigherPipeline::new(vec![Box::new(RAMWeigher { multiplier: 1.0 })]);
        let (_, e) = p
            .weigh_explained(&ram_hosts(&[1]), &[0], &RequestSpec::default())
            .expect("weigh");
        assert!(e.hosts[0].scores.is_empty());
    }

    #[test]
    fn single_host_is_not_weighed() {
        let p = WeigherPipeline::new(vec![Box::new(RAMWeigher { multiplier: 1.0 })]);
        assert_eq!(order(&p, &ram_hosts(&[4096])), vec![(0, 0.0)]);
    }
}
