// SPDX-License-Identifier: Apache-2.0
//! oslo.utils' `strutils.bool_from_string`, which nova applies to flavor extra specs,
//! image properties and PCI tags.
//!
//! `bool_from_string(s)` is `s.strip().lower()` looked up in two word lists; the
//! strip is Python's (U+001C..U+001F and Unicode spaces count, unlike Rust's
//! `trim`), so it is built on [`super::str`].

use super::error::PyError;
use super::str::{lower, strip};

/// `strutils.TRUE_STRINGS`.
const TRUE_STRINGS: [&str; 6] = ["1", "t", "true", "on", "y", "yes"];
/// `strutils.FALSE_STRINGS`.
const FALSE_STRINGS: [&str; 6] = ["0", "f", "false", "off", "n", "no"];

/// `bool_from_string(s)` (strict=False, default=False): true only for the true words.
pub fn bool_from_string(s: &str) -> bool {
    TRUE_STRINGS.contains(&lower(strip(s)).as_str())
}

/// `bool_from_string(s, strict=True)`: a word of neither list raises `ValueError`.
pub fn bool_from_string_strict(s: &str) -> Result<bool, PyError> {
    let lowered = lower(strip(s));
    if TRUE_STRINGS.contains(&lowered.as_str()) {
        Ok(true)
    } else if FALSE_STRINGS.contains(&lowered.as_str()) {
        Ok(false)
    } else {
        let mut all: Vec<&str> = TRUE_STRINGS.iter().chain(&FALSE_STRINGS).copied().collect();
        all.sort_unstable();
        let acceptable: Vec<String> = all.iter().map(|w| format!("'{w}'")).collect();
        Err(PyError::value_error(format!(
            "Unrecognized value '{s}', acceptable values are: {}",
            acceptable.join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_as_oslo() {
        assert!(bool_from_string(" Yes "));
        assert!(bool_from_string("\u{1c}TRUE\u{a0}"));
        assert!(bool_from_string("1"));
        assert!(!bool_from_string("2"));
        assert!(!bool_from_string("None"));
        assert_eq!(bool_from_string_strict(" off"), Ok(false));
        assert_eq!(
            bool_from_string_strict("maybe").unwrap_err().message,
            "Unrecognized value 'maybe', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'"
        );
    }
}
