// SPDX-License-Identifier: Apache-2.0
//! nova's `weights.normalize`: map a weight list onto [0, 1].
//!
//! `lo`/`hi` are the weigher's `minval`/`maxval` when set, else the list's min/max;
//! when they are equal every value becomes 0. A weigher with `minval = 0` (RAM, CPU,
//! Disk, IoOps) therefore normalizes free vCPUs 5,10,20 to 0.25,0.5,1.0, while plain
//! min/max normalization would give 0,0.33,1.0: same ranking, different weights,
//! which matters once several weighers are summed.

pub fn normalize(weights: &[f64], minval: Option<f64>, maxval: Option<f64>) -> Vec<f64> {
    if weights.is_empty() {
        return Vec::new();
    }
    let (lo, hi) = bounds(weights, minval, maxval);
    weights.iter().map(|&w| normalize_one(w, lo, hi)).collect()
}

/// The `(lo, hi)` that [`normalize`] maps onto [0, 1]; `weights` not empty.
pub(crate) fn bounds(weights: &[f64], minval: Option<f64>, maxval: Option<f64>) -> (f64, f64) {
    let hi = maxval.unwrap_or_else(|| py_max(weights));
    let lo = minval.unwrap_or_else(|| py_min(weights));
    (lo, hi)
}

/// One value as [`normalize`] maps it with bounds `(lo, hi)`.
#[inline]
pub(crate) fn normalize_one(w: f64, lo: f64, hi: f64) -> f64 {
    if lo == hi {
        0.0
    } else {
        (w - lo) / (hi - lo)
    }
}

/// Python's `max(list)`: the first element, replaced by every later one that is
/// strictly greater. Differs from `f64::max` only when NaN is involved (a NaN first
/// element stays; a later NaN never replaces).
pub(crate) fn py_max(weights: &[f64]) -> f64 {
    weights[1..]
        .iter()
        .fold(weights[0], |best, &w| if w > best { w } else { best })
}

/// Python's `min(list)`, see [`py_max`].
pub(crate) fn py_min(weights: &[f64]) -> f64 {
    weights[1..]
        .iter()
        .fold(weights[0], |best, &w| if w < best { w } else { best })
}

#[cfg(test)]
mod tests {
    use super::normalize;

    fn approx(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-9, "{a:?} != {b:?}");
        }
    }

    /// nova's test_weights normalization table.
    #[test]
    fn nova_vectors() {
        approx(&normalize(&[], None, None), &[]);
        approx(&normalize(&[0.0, 0.0], None, None), &[0.0, 0.0]);
        approx(&normalize(&[1.0, 1.0], None, None), &[0.0, 0.0]);
        approx(&normalize(&[20.0, 50.0], None, None), &[0.0, 1.0]);
        approx(&normalize(&[20.0, 50.0], None, Some(100.0)), &[0.0, 0.375]);
        approx(&normalize(&[20.0, 50.0], Some(0.0), None), &[0.4, 1.0]);
        approx(
            &normalize(&[20.0, 50.0], Some(0.0), Some(100.0)),
            &[0.2, 0.5],
        );
    }

    /// Plain min/max against nova's CPUWeigher floor of 0, on ten hosts' free vCPUs.
    #[test]
    fn worked_example_min_max_versus_floor() {
        let free = [5.0, 5.0, 10.0, 10.0, 15.0, 20.0, 20.0, 15.0, 10.0, 5.0];
        let third = 1.0 / 3.0;
        approx(
            &normalize(&free, None, None),
            &[
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
            ],
        );
        approx(
            &normalize(&free, Some(0.0), None),
            &[0.25, 0.25, 0.5, 0.5, 0.75, 1.0, 1.0, 0.75, 0.5, 0.25],
        );
    }
}
