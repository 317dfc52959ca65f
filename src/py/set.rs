// SPDX-License-Identifier: Apache-2.0
//! A set of integers that iterates in the order CPython 3.11's `set` does.
//!
//! nova's CPU pinning takes "the first k CPUs" of a sibling set with
//! `list(s)[:k]`, so which host CPUs an instance gets depends on the hash-table
//! layout of Python sets. To pick the same CPUs we keep the same layout: open
//! addressing with 9 linear probes then perturbation, resize at 3/5 fill, and the
//! insertion orders of the operations nova uses (`set(list)`, `&`, `-`, `|=`, and
//! oslo.versionedobjects' field coercion, which rebuilds a set by iteration).
//!
//! Written by hand: Rust's sets iterate in their own orders, and no maintained crate
//! reproduces CPython's table.

const MIN_SIZE: usize = 8;
const LINEAR_PROBES: usize = 9;
const PERTURB_SHIFT: u32 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Empty,
    Dummy,
    Key(i64, u64),
}

/// A `set[int]` with CPython's table layout (and therefore its iteration order).
#[derive(Debug, Clone)]
pub struct PySet {
    table: Vec<Slot>,
    fill: usize,
    used: usize,
}

/// `hash(int)` as CPython computes it, reinterpreted as `size_t`.
fn py_hash(v: i64) -> u64 {
    const MODULUS: i128 = (1 << 61) - 1;
    let v = v as i128;
    let mut h = v.abs() % MODULUS;
    if v < 0 {
        h = -h;
    }
    if h == -1 {
        h = -2;
    }
    h as i64 as u64
}

impl Default for PySet {
    fn default() -> Self {
        PySet::new()
    }
}

impl PartialEq for PySet {
    /// Set equality, as Python compares sets (layout is irrelevant).
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|k| other.contains(k))
    }
}

impl Eq for PySet {}

impl FromIterator<i64> for PySet {
    /// `set(iterable)`: keys added one by one in the iterable's order.
    fn from_iter<I: IntoIterator<Item = i64>>(iter: I) -> Self {
        let mut s = PySet::new();
        for k in iter {
            s.add(k);
        }
        s
    }
}

impl PySet {
    pub fn new() -> Self {
        PySet {
            table: vec![Slot::Empty; MIN_SIZE],
            fill: 0,
            used: 0,
        }
    }

    fn mask(&self) -> usize {
        self.table.len() - 1
    }

    pub fn len(&self) -> usize {
        self.used
    }

    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// Keys in CPython's iteration order.
    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        self.table.iter().filter_map(|s| match s {
            Slot::Key(k, _) => Some(*k),
            _ => None,
        })
    }

    /// Keys in CPython's iteration order, collected (`list(s)`).
    pub fn to_vec(&self) -> Vec<i64> {
        self.iter().collect()
    }

    /// Keys in ascending order (for output and error messages).
    pub fn sorted(&self) -> Vec<i64> {
        let mut v = self.to_vec();
        v.sort_unstable();
        v
    }

    /// The slot holding `key`, if any (CPython's `set_lookkey`).
    fn find(&self, key: i64) -> Option<usize> {
        let hash = py_hash(key);
        let mask = self.mask();
        let mut i = (hash as usize) & mask;
        let mut perturb = hash;
        loop {
            let probes = if i + LINEAR_PROBES <= mask {
                LINEAR_PROBES
            } else {
                0
            };
            for j in i..=i + probes {
                match self.table[j] {
                    Slot::Empty => return None,
                    Slot::Key(k, _) if k == key => return Some(j),
                    _ => {}
                }
            }
            perturb >>= PERTURB_SHIFT;
            i = (i
                .wrapping_mul(5)
                .wrapping_add(1)
                .wrapping_add(perturb as usize))
                & mask;
        }
    }

    pub fn contains(&self, key: i64) -> bool {
        self.find(key).is_some()
    }

    /// `set.add` (CPython's `set_add_entry`, including the resize it triggers).
    pub fn add(&mut self, key: i64) {
        let hash = py_hash(key);
        let mask = self.mask();
        let mut i = (hash as usize) & mask;
        let mut perturb = hash;
        let mut freeslot: Option<usize> = None;
        let target = 'probe: loop {
            let probes = if i + LINEAR_PROBES <= mask {
                LINEAR_PROBES
            } else {
                0
            };
            for j in i..=i + probes {
                match self.table[j] {
                    Slot::Empty => break 'probe j,
                    Slot::Key(k, _) if k == key => return,
                    Slot::Dummy => {
                        if freeslot.is_none() {
                            freeslot = Some(j);
                        }
                    }
                    Slot::Key(..) => {}
                }
            }
            perturb >>= PERTURB_SHIFT;
            i = (i
                .wrapping_mul(5)
                .wrapping_add(1)
                .wrapping_add(perturb as usize))
                & mask;
        };
        if let Some(free) = freeslot {
            self.used += 1;
            self.table[free] = Slot::Key(key, hash);
            return;
        }
        self.fill += 1;
        self.used += 1;
        self.table[target] = Slot::Key(key, hash);
        if self.fill * 5 < mask * 3 {
            return;
        }
        let minused = if self.used > 50_000 {
            self.used * 2
        } else {
            self.used * 4
        };
        self.resize(minused);
    }

    /// `set.discard`: the slot becomes a dummy (it keeps its place in probe chains).
    pub fn discard(&mut self, key: i64) {
        if let Some(j) = self.find(key) {
            self.table[j] = Slot::Dummy;
            self.used -= 1;
        }
    }

    fn insert_clean(table: &mut [Slot], key: i64, hash: u64) {
        let mask = table.len() - 1;
        let mut i = (hash as usize) & mask;
        let mut perturb = hash;
        loop {
            if table[i] == Slot::Empty {
                table[i] = Slot::Key(key, hash);
                return;
            }
            if i + LINEAR_PROBES <= mask {
                if let Some(slot) = table[i + 1..=i + LINEAR_PROBES]
                    .iter_mut()
                    .find(|s| **s == Slot::Empty)
                {
                    *slot = Slot::Key(key, hash);
                    return;
                }
            }
            perturb >>= PERTURB_SHIFT;
            i = (i
                .wrapping_mul(5)
                .wrapping_add(1)
                .wrapping_add(perturb as usize))
                & mask;
        }
    }

    /// CPython's `set_table_resize`: smallest power of two above `minused`.
    fn resize(&mut self, minused: usize) {
        let mut newsize = MIN_SIZE;
        while newsize <= minused {
            newsize <<= 1;
        }
        let mut table = vec![Slot::Empty; newsize];
        for slot in &self.table {
            if let Slot::Key(k, h) = *slot {
                Self::insert_clean(&mut table, k, h);
            }
        }
        self.table = table;
        self.fill = self.used;
    }

    /// `so |= other` / `so.update(other_set)` (CPython's `set_merge`).
    pub fn merge(&mut self, other: &PySet) {
        if other.used == 0 {
            return;
        }
        if (self.fill + other.used) * 5 >= self.mask() * 3 {
            self.resize((self.used + other.used) * 2);
        }
        if self.fill == 0 && self.mask() == other.mask() && other.fill == other.used {
            self.table.clone_from(&other.table);
            self.fill = other.fill;
            self.used = other.used;
            return;
        }
        if self.fill == 0 {
            self.fill = other.used;
            self.used = other.used;
            for slot in &other.table {
                if let Slot::Key(k, h) = *slot {
                    Self::insert_clean(&mut self.table, k, h);
                }
            }
            return;
        }
        for slot in &other.table {
            if let Slot::Key(k, _) = *slot {
                self.add(k);
            }
        }
    }

    /// `set.copy()` / `set(a_set)`.
    pub fn copy(&self) -> PySet {
        let mut s = PySet::new();
        s.merge(self);
        s
    }

    /// oslo.versionedobjects' `Set.coerce`, which every assignment of a set to an
    /// object field goes through: a plain set built by iterating this one, then
    /// `CoercedSet().update(that)` (a merge into an empty table).
    pub fn coerced(&self) -> PySet {
        let iterated: PySet = self.iter().collect();
        let mut out = PySet::new();
        out.merge(&iterated);
        out
    }

    /// `self - other` (CPython's `set_difference`, both strategies).
    pub fn difference(&self, other: &PySet) -> PySet {
        if (self.len() >> 2) > other.len() {
            let mut result = self.copy();
            for k in other.iter() {
                result.discard(k);
            }
            return result;
        }
        let mut result = PySet::new();
        for k in self.iter() {
            if !other.contains(k) {
                result.add(k);
            }
        }
        result
    }

    /// `self & other` (CPython's `set_intersection`: iterates the smaller set).
    pub fn intersection(&self, other: &PySet) -> PySet {
        let (big, small) = if other.len() > self.len() {
            (other, self)
        } else {
            (self, other)
        };
        let mut result = PySet::new();
        for k in small.iter() {
            if big.contains(k) {
                result.add(k);
            }
        }
        result
    }

    pub fn is_disjoint(&self, other: &PySet) -> bool {
        !self.iter().any(|k| other.contains(k))
    }

    pub fn is_subset(&self, other: &PySet) -> bool {
        self.iter().all(|k| other.contains(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_ints_iterate_by_low_bits() {
        let s: PySet = [5, 17].into_iter().collect();
        assert_eq!(s.to_vec(), vec![17, 5]);
        let s: PySet = [1, 33].into_iter().collect();
        assert_eq!(s.to_vec(), vec![1, 33]);
        let s: PySet = [33, 1].into_iter().collect();
        assert_eq!(s.to_vec(), vec![33, 1]);
    }

    #[test]
    fn hashes_match_python() {
        assert_eq!(py_hash(-1), (-2i64) as u64);
        assert_eq!(py_hash(7), 7);
        assert_eq!(py_hash((1 << 61) - 1), 0);
        assert_eq!(py_hash(-5), (-5i64) as u64);
    }

    #[test]
    fn resize_and_set_ops_keep_membership() {
        let a: PySet = (0..100).rev().collect();
        let b: PySet = (50..60).collect();
        assert_eq!(a.len(), 100);
        assert_eq!(a.difference(&b).len(), 90);
        assert_eq!(a.intersection(&b).sorted(), (50..60).collect::<Vec<_>>());
        let mut c = b.copy();
        c.merge(&a);
        assert_eq!(c.len(), 100);
        assert!(b.is_subset(&a) && !a.is_subset(&b));
    }
}
