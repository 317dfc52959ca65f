// SPDX-License-Identifier: Apache-2.0
//! A request's allocation candidates per row of a [`HostTable`](super::HostTable).
//!
//! Built once per request over every candidate Placement (or the provider index)
//! returned, so it is laid out for that: the candidates sit in one list, each row's
//! contiguous, and a row finds its part through one slot per table row. In the
//! common case (one candidate per compute node, listed in the order of the
//! providers) the list is the answer's own list, moved as it is.

use crate::model::AllocationCandidate;

/// A request's allocation candidates per table row. A row that is not a
/// candidate of the request has none; a candidate row may have none either (it
/// is then skipped when claiming, as nova does).
#[derive(Debug, Clone, Default)]
pub struct RowCandidates {
    /// Per table row: index into `spans`, or `NONE`.
    slot: Vec<u32>,
    /// The candidate rows, in the order they were added.
    spans: Vec<Span>,
    /// Every row's candidates, each row's contiguous.
    items: Vec<AllocationCandidate>,
}

/// A candidate row's part of `items`.
#[derive(Debug, Clone, Copy)]
struct Span {
    row: u32,
    start: u32,
    len: u32,
}

const NONE: u32 = u32::MAX;

impl RowCandidates {
    /// No candidate yet, for a table of `rows` rows.
    pub fn new(rows: usize) -> Self {
        RowCandidates {
            slot: vec![NONE; rows],
            spans: Vec::new(),
            items: Vec::new(),
        }
    }

    /// The rows of `uuids` (compute node uuids; `row_of` gives a uuid's row, `None`
    /// for a provider that is not a table row), each with the candidates that
    /// allocate from its provider, in the candidates' order. A candidate naming
    /// several rows' providers is listed under each; one naming none (a child or
    /// sharing provider alone) under none, as nova's `alloc_reqs_by_rp_uuid` leaves
    /// it to no host state.
    pub fn from_candidates(
        rows: usize,
        uuids: &[String],
        candidates: Vec<AllocationCandidate>,
        row_of: impl Fn(&str) -> Option<usize>,
    ) -> Self {
        let mut built = RowCandidates::new(rows);
        // The row of each uuid, kept: the candidates usually name the uuids' own
        // providers in the same order, so most of them find their row by a string
        // comparison instead of a second lookup.
        let mut uuid_spans = Vec::with_capacity(uuids.len());
        for uuid in uuids {
            let span = row_of(uuid).map(|row| built.span_of_new_row(row));
            uuid_spans.push(span.unwrap_or(NONE));
        }
        let span_of = |provider: &str| row_of(provider).map(|row| built.slot[row]).unwrap_or(NONE);
        // (span, candidate) for each row a candidate is listed under, in the
        // candidates' order.
        let mut placed: Vec<(u32, u32)> = Vec::with_capacity(candidates.len());
        for (i, candidate) in candidates.iter().enumerate() {
            if let Some(provider) = candidate.single_provider_uuid() {
                let span = match uuids.get(i) {
                    Some(uuid) if uuid.as_str() == &**provider => uuid_spans[i],
                    _ => span_of(provider),
                };
                if span != NONE {
                    placed.push((span, i as u32));
                }
                continue;
            }
            for provider in candidate.providers() {
                let span = span_of(&provider);
                if span != NONE {
                    placed.push((span, i as u32));
                }
            }
        }
        for &(span, _) in &placed {
            built.spans[span as usize].len += 1;
        }
        let in_order = placed.len() == candidates.len()
            && placed
                .iter()
                .enumerate()
                .all(|(i, &(_, c))| c as usize == i)
            && placed.windows(2).all(|w| w[0].0 <= w[1].0);
        if in_order {
            // Each candidate under one row, the rows in the candidates' order: the
            // list is already laid out.
            let mut start = 0;
            for span in &mut built.spans {
                span.start = start;
                start += span.len;
            }
            built.items = candidates;
            return built;
        }
        built.lay_out(placed, candidates);
        built
    }

    /// The general layout: each row's candidates gathered, a candidate listed
    /// under several rows cloned for all but its last.
    fn lay_out(&mut self, mut placed: Vec<(u32, u32)>, candidates: Vec<AllocationCandidate>) {
        let mut uses = vec![0u32; candidates.len()];
        for &(_, c) in &placed {
            uses[c as usize] += 1;
        }
        // Stable: each row keeps the candidates' order.
        placed.sort_by_key(|&(span, _)| span);
        let mut start = 0;
        for span in &mut self.spans {
            span.start = start;
            start += span.len;
        }
        let mut pool: Vec<Option<AllocationCandidate>> = candidates.into_iter().map(Some).collect();
        self.items = Vec::with_capacity(placed.len());
        for (_, c) in placed {
            let c = c as usize;
            uses[c] -= 1;
            let candidate = if uses[c] == 0 {
                pool[c].take()
            } else {
                pool[c].clone()
            };
            self.items.extend(candidate);
        }
    }

    /// The span of `row`, added (empty) if it has none yet.
    fn span_of_new_row(&mut self, row: usize) -> u32 {
        match self.slot[row] {
            NONE => {
                let span = self.spans.len() as u32;
                self.slot[row] = span;
                self.spans.push(Span {
                    row: row as u32,
                    start: 0,
                    len: 0,
                });
                span
            }
            span => span,
        }
    }

    /// Makes `row` a candidate with these allocation candidates (replacing any;
    /// the replaced ones are freed with the whole).
    pub fn insert(&mut self, row: usize, candidates: Vec<AllocationCandidate>) {
        let span = self.span_of_new_row(row) as usize;
        self.spans[span].start = self.items.len() as u32;
        self.spans[span].len = candidates.len() as u32;
        self.items.extend(candidates);
    }

    /// `None`: not a candidate of the request.
    pub fn get(&self, row: usize) -> Option<&[AllocationCandidate]> {
        match self.slot.get(row) {
            Some(&s) if s != NONE => {
                let span = self.spans[s as usize];
                Some(&self.items[span.start as usize..(span.start + span.len) as usize])
            }
            _ => None,
        }
    }

    pub fn contains(&self, row: usize) -> bool {
        self.slot.get(row).is_some_and(|&s| s != NONE)
    }

    /// Number of candidate rows.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The candidate rows, in the order they were added.
    pub(crate) fn rows(&self) -> impl Iterator<Item = u32> + '_ {
        self.spans.iter().map(|s| s.row)
    }

    /// The candidate rows in table order, each with its candidates.
    pub(crate) fn into_sorted(self) -> Vec<(usize, Vec<AllocationCandidate>)> {
        let mut spans = self.spans;
        spans.sort_unstable_by_key(|s| s.row);
        let mut pool: Vec<Option<AllocationCandidate>> = self.items.into_iter().map(Some).collect();
        spans
            .into_iter()
            .map(|s| {
                let part = pool[s.start as usize..(s.start + s.len) as usize]
                    .iter_mut()
                    .filter_map(Option::take)
                    .collect();
                (s.row as usize, part)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map, Value};
    use std::collections::HashMap;
    use std::sync::Arc;

    const UUIDS: [&str; 4] = ["rp-a", "rp-b", "rp-c", "rp-d"];

    fn row_of(uuid: &str) -> Option<usize> {
        UUIDS.iter().position(|u| *u == uuid)
    }

    fn single(provider: &str, vcpu: i64) -> AllocationCandidate {
        let mut resources = Map::new();
        resources.insert("VCPU".into(), Value::from(vcpu));
        AllocationCandidate::single_provider(Arc::from(provider), Arc::new(resources))
    }

    fn spread(providers: &[&str], vcpu: i64) -> AllocationCandidate {
        let allocations: Map<String, Value> = providers
            .iter()
            .map(|p| (p.to_string(), json!({"resources": {"VCPU": vcpu}})))
            .collect();
        AllocationCandidate::from_json(json!({"allocations": allocations, "mappings": {}}))
    }

    /// nova's `alloc_reqs_by_rp_uuid`, then each uuid's list: what every row must hold.
    fn reference(uuids: &[String], candidates: &[AllocationCandidate]) -> Vec<(usize, Vec<Value>)> {
        let mut by_rp: HashMap<String, Vec<Value>> = HashMap::new();
        for c in candidates {
            for p in c.providers() {
                by_rp
                    .entry(p.to_string())
                    .or_default()
                    .push(c.json().clone());
            }
        }
        let mut rows: Vec<(usize, Vec<Value>)> = Vec::new();
        for u in uuids {
            if let Some(row) = row_of(u) {
                if !rows.iter().any(|(r, _)| *r == row) {
                    rows.push((row, by_rp.remove(u.as_str()).unwrap_or_default()));
                }
            }
        }
        rows.sort_by_key(|(r, _)| *r);
        rows
    }

    fn check(uuids: &[&str], candidates: Vec<AllocationCandidate>) -> RowCandidates {
        let uuids: Vec<String> = uuids.iter().map(|u| u.to_string()).collect();
        let want = reference(&uuids, &candidates);
        let built = RowCandidates::from_candidates(UUIDS.len(), &uuids, candidates, row_of);
        assert_eq!(built.len(), want.len());
        for row in 0..UUIDS.len() {
            let got = built
                .get(row)
                .map(|l| l.iter().map(|c| c.json().clone()).collect::<Vec<_>>());
            let expected = want.iter().find(|(r, _)| *r == row).map(|(_, l)| l.clone());
            assert_eq!(got, expected, "row {row}");
        }
        let sorted: Vec<(usize, Vec<Value>)> = built
            .clone()
            .into_sorted()
            .into_iter()
            .map(|(r, l)| (r, l.iter().map(|c| c.json().clone()).collect()))
            .collect();
        assert_eq!(sorted, want);
        built
    }

    #[test]
    fn one_candidate_per_provider_in_order_is_the_list_moved() {
        let built = check(
            &["rp-a", "rp-b", "rp-d"],
            vec![single("rp-a", 1), single("rp-b", 1), single("rp-d", 1)],
        );
        assert!(!built.contains(2));
        assert_eq!(built.items.len(), 3);
    }

    #[test]
    fn a_provider_without_candidates_is_a_row_with_none() {
        let built = check(
            &["rp-a", "rp-b", "rp-c"],
            vec![single("rp-a", 1), single("rp-c", 1)],
        );
        assert_eq!(built.get(1).map(<[_]>::len), Some(0));
        assert_eq!(built.get(3), None);
    }

    #[test]
    fn candidates_out_of_the_providers_order_keep_their_own_order_per_row() {
        check(
            &["rp-c", "rp-a", "rp-b"],
            vec![
                single("rp-a", 1),
                single("rp-b", 2),
                single("rp-a", 3),
                single("rp-c", 4),
            ],
        );
    }

    #[test]
    fn a_candidate_naming_several_rows_is_listed_under_each() {
        check(
            &["rp-a", "rp-b", "rp-c", "child-of-a"],
            vec![
                spread(&["rp-a", "child-of-a"], 1),
                spread(&["rp-a", "rp-b"], 2),
                single("rp-c", 3),
                spread(&["child-of-a"], 4),
            ],
        );
    }

    #[test]
    fn providers_outside_the_table_are_no_rows() {
        check(
            &["rp-x", "rp-a"],
            vec![single("rp-x", 1), single("rp-a", 1)],
        );
    }

    #[test]
    fn insert_replaces_a_rows_candidates() {
        let mut rows = RowCandidates::new(4);
        rows.insert(2, vec![single("rp-c", 1)]);
        rows.insert(0, vec![single("rp-a", 1), single("rp-a", 2)]);
        rows.insert(2, vec![single("rp-c", 3)]);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows.get(2).unwrap()[0].json(), single("rp-c", 3).json());
        let sorted = rows.into_sorted();
        assert_eq!(
            sorted
                .iter()
                .map(|(r, l)| (*r, l.len()))
                .collect::<Vec<_>>(),
            vec![(0, 2), (2, 1)]
        );
    }
}
