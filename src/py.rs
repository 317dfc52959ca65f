// SPDX-License-Identifier: Apache-2.0
//! Python as nova's code runs on it (CPython 3.11 and the oslo libraries): the
//! value semantics the scheduler must reproduce to decide byte for byte as nova does.
//!
//! This is the ground floor of the crate: it depends on nothing else in it (only
//! std, serde_json, chrono and thiserror), and every layer that meets a Python
//! behaviour uses the one implementation here.
//!
//! - [`error`]: the exceptions (`ValueError`, `TypeError`, ...) as [`PyError`].
//! - [`str`]: `str` itself ([`str::PyStr`]), `isspace`, `strip`, `split`, `lower`,
//!   `isprintable`, `repr(str)`.
//! - [`int`]: `int` ([`int::PyInt`], unbounded) and `int(str)`.
//! - [`float`]: `float(str)` and `repr(float)`.
//! - [`value`]: a Python value model with `==`, `<`, truthiness, `str()`, `repr()`.
//! - [`json`]: `json.loads` and `json.dumps`.
//! - [`set`]: a `set[int]` iterating in CPython's order.
//! - [`version`]: PEP 440 versions and oslo's `VersionPredicate`.
//! - [`distutils_version`]: distutils' `StrictVersion` and `VersionPredicate` (nova 29, 30).
//! - [`strutils`]: oslo.utils' `bool_from_string`.
//! - [`object`]: oslo.versionedobjects primitives and field coercions.
//!
//! Each is written by hand: no maintained crate reproduces CPython's semantics
//! (which characters are whitespace, what `int()` accepts, how a float prints, in
//! which order a set iterates), and nova's decisions depend on exactly those.

pub mod distutils_version;
pub mod error;
pub mod float;
pub mod int;
pub mod json;
pub mod object;
pub mod set;
pub mod str;
pub mod strutils;
pub mod value;
pub mod version;

pub use error::{PyError, PyExc};
