// SPDX-License-Identifier: Apache-2.0
//! The provider index itself: Placement's providers, inventories, usages, traits and
//! aggregates, keyed by Placement's internal ids as its tables are. Pure data; the
//! loader fills it, the candidate search reads it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// One `inventories` row.
#[derive(Debug, Clone, PartialEq)]
pub struct Inventory {
    pub total: i64,
    pub reserved: i64,
    pub min_unit: i64,
    pub max_unit: i64,
    pub step_size: i64,
    /// The `FLOAT` column as MariaDB stores it (single precision). Placement's SQL
    /// capacity check multiplies with this value widened to double.
    pub allocation_ratio: f32,
    /// The same column as Placement's Python sees it: the text MariaDB sends
    /// (`CAST(allocation_ratio AS CHAR)`) parsed as a double. Provider summaries and
    /// the final capacity check use it.
    pub allocation_ratio_text: f64,
}

impl Inventory {
    /// The provider summary's `capacity`: Python's `int((total - reserved) * ratio)`.
    pub fn summary_capacity(&self) -> i64 {
        ((self.total - self.reserved) as f64 * self.allocation_ratio_text) as i64
    }

    /// Whether `amount` more fits on top of `used`, as Placement decides it: its SQL
    /// filter (`used + amount <= (total - reserved) * ratio`, `min_unit`, `max_unit`,
    /// `step_size`) and then its Python check against the summary capacity.
    pub fn fits(&self, used: i64, amount: i64) -> bool {
        self.fits_sql(used, amount) && used + amount <= self.summary_capacity()
    }

    /// Placement's SQL filter alone (`_capacity_check_clause`): the search for
    /// providers with room; the Python check runs on the summed candidate.
    pub fn fits_sql(&self, used: i64, amount: i64) -> bool {
        let Some(after) = used.checked_add(amount) else {
            return false;
        };
        let sql_capacity = (self.total - self.reserved) as f64 * f64::from(self.allocation_ratio);
        self.step_size != 0
            && (after as f64) <= sql_capacity
            && self.min_unit <= amount
            && amount <= self.max_unit
            && amount % self.step_size == 0
    }
}

/// One resource provider and everything attached to it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Provider {
    pub id: i64,
    /// Shared with every candidate the index returns for it.
    pub uuid: Arc<str>,
    pub generation: i64,
    pub parent_id: Option<i64>,
    pub root_id: i64,
    /// By resource class id.
    pub inventories: BTreeMap<i64, Inventory>,
    /// `SUM(allocations.used)` by resource class id (classes without inventory too).
    pub usages: BTreeMap<i64, i64>,
    /// Trait ids.
    pub traits: BTreeSet<i64>,
    /// Aggregate ids.
    pub aggregates: BTreeSet<i64>,
}

impl Provider {
    pub fn used(&self, rc: i64) -> i64 {
        self.usages.get(&rc).copied().unwrap_or(0)
    }
}

/// A two-way map of a name table (`resource_classes`, `traits`, `placement_aggregates`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NameTable {
    by_name: HashMap<String, i64>,
    by_id: HashMap<i64, String>,
}

impl NameTable {
    pub fn from_rows(rows: impl IntoIterator<Item = (i64, String)>) -> Self {
        let mut table = NameTable::default();
        for (id, name) in rows {
            table.by_name.insert(name.clone(), id);
            table.by_id.insert(id, name);
        }
        table
    }

    pub fn id(&self, name: &str) -> Option<i64> {
        self.by_name.get(name).copied()
    }

    pub fn name(&self, id: i64) -> Option<&str> {
        self.by_id.get(&id).map(String::as_str)
    }

    /// Every name, in no particular order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// Placement's state as the candidate search needs it.
#[derive(Debug, Clone, Default)]
pub struct ProviderIndex {
    pub resource_classes: NameTable,
    pub traits: NameTable,
    /// Aggregate uuid ↔ internal id.
    pub aggregates: NameTable,
    /// By internal id.
    pub providers: BTreeMap<i64, Provider>,
    /// Provider uuid → internal id.
    pub by_uuid: HashMap<Arc<str>, i64>,
    /// Where the last read left off (the loader's bookkeeping, not Placement's
    /// state: two indexes holding the same providers are equal whatever their marks).
    pub marks: Option<ReadMarks>,
    /// Whether some provider has a parent, and whether some provider shares via
    /// aggregate: known when the providers change ([`reshape`](Self::reshape)), not
    /// looked for over every provider on every request.
    pub(super) shape: Shape,
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Shape {
    trees: bool,
    sharing: bool,
}

impl PartialEq for ProviderIndex {
    fn eq(&self, other: &Self) -> bool {
        self.resource_classes == other.resource_classes
            && self.traits == other.traits
            && self.aggregates == other.aggregates
            && self.providers == other.providers
            && self.by_uuid == other.by_uuid
    }
}

/// What the loader remembers of its last read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadMarks {
    /// `resource_providers`' `(COUNT(*), MAX(id))`: a provider added or deleted
    /// changes it, and then every provider is listed again.
    pub providers: (i64, i64),
    /// The newest `updated_at`/`created_at` of `resource_providers` (Placement's
    /// clock, whole seconds): the next read lists the rows stamped since, less a lag.
    pub newest_change: Option<chrono::NaiveDateTime>,
    /// `allocations`' `(COUNT(*), MAX(id))` when they were last counted: rows are only
    /// inserted or deleted, with increasing ids, so a count that the rows past the old
    /// top explain means no deletion.
    pub allocations: (i64, i64),
    /// When the usages were last summed in full, and what that read cost.
    pub full_at: std::time::Instant,
    pub full_cost: std::time::Duration,
    /// When the allocation rows were last counted (paced by `full_cost`).
    pub checked_at: std::time::Instant,
}

/// Placement's trait for sharing providers.
pub const SHARING_TRAIT: &str = "MISC_SHARES_VIA_AGGREGATE";

impl ProviderIndex {
    /// Adds or replaces a provider.
    pub fn upsert(&mut self, provider: Provider) {
        self.note_shape(&provider);
        self.by_uuid.insert(provider.uuid.clone(), provider.id);
        self.providers.insert(provider.id, provider);
    }

    /// Drops providers whose ids are not in `keep`.
    pub fn retain_ids(&mut self, keep: &BTreeSet<i64>) {
        self.providers.retain(|id, _| keep.contains(id));
        let providers = &self.providers;
        self.by_uuid.retain(|_, id| providers.contains_key(id));
        self.reshape();
    }

    /// Counts `provider` (new or replacing one) into the shape without a pass over
    /// every provider. A flag it leaves set after a replacement only sends requests
    /// to the general search, which answers flat clouds alike; the next
    /// [`reshape`](Self::reshape) clears it.
    pub(super) fn note_shape(&mut self, provider: &Provider) {
        self.shape.trees |= provider.parent_id.is_some();
        self.shape.sharing |= self
            .traits
            .id(SHARING_TRAIT)
            .is_some_and(|t| provider.traits.contains(&t));
    }

    /// Records whether the index holds provider trees and sharing providers, over
    /// every provider; to be called after changing `providers` or `traits` directly
    /// ([`retain_ids`](Self::retain_ids) and a complete refresh call it).
    pub fn reshape(&mut self) {
        let sharing = self.traits.id(SHARING_TRAIT);
        self.shape = Shape {
            trees: self.providers.values().any(|p| p.parent_id.is_some()),
            sharing: sharing
                .is_some_and(|t| self.providers.values().any(|p| p.traits.contains(&t))),
        };
    }

    pub fn provider(&self, uuid: &str) -> Option<&Provider> {
        self.by_uuid.get(uuid).and_then(|id| self.providers.get(id))
    }

    /// Placement's `_has_provider_trees`: some provider has a parent.
    pub fn has_trees(&self) -> bool {
        self.shape.trees
    }

    /// Placement's `get_sharing_providers` is not empty.
    pub fn has_sharing(&self) -> bool {
        self.shape.sharing
    }

    /// Records our own claim: `amounts` (resource class name → amount) per provider
    /// uuid, added to the usages until the next refresh reads the real ones.
    /// Returns false when a provider or class is unknown (nothing is changed then).
    pub fn apply_claim(&mut self, allocations: &[(String, Vec<(String, i64)>)]) -> bool {
        let mut resolved = Vec::new();
        for (rp, amounts) in allocations {
            let Some(&id) = self.by_uuid.get(rp.as_str()) else {
                return false;
            };
            for (rc, amount) in amounts {
                let Some(rc_id) = self.resource_classes.id(rc) else {
                    return false;
                };
                resolved.push((id, rc_id, *amount));
            }
        }
        for (id, rc_id, amount) in resolved {
            if let Some(p) = self.providers.get_mut(&id) {
                *p.usages.entry(rc_id).or_insert(0) += amount;
            }
        }
        true
    }
}
