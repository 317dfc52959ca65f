// SPDX-License-Identifier: Apache-2.0
//! Options set in the files that nothing reads, named with the closest option that is
//! read.
//!
//! oslo.config ignores unknown options (one nova.conf serves every nova service), so
//! these are warnings, never errors. In `[nova_scheduler_rs]`, which only this daemon
//! reads, every unknown option is named. In nova's groups the daemon reads, an unknown
//! option is named only when it is a likely typo of one the daemon reads (at most two
//! edits away): the same group holds many options of other nova services that are no
//! concern of the scheduler's.

use super::options::OPTIONS;
use super::RawConfig;

/// This daemon's own group.
const OWN_GROUP: &str = "nova_scheduler_rs";
/// Groups whose unknown options are reported elsewhere (`[oslo_messaging_rabbit]`:
/// options oslo.messaging dropped, accepted but not used).
const REPORTED_ELSEWHERE: &[&str] = &["oslo_messaging_rabbit"];
/// Most edits between a set name and a read one for a shared group's name to count as
/// a typo; names shorter than [`MIN_TYPO_LEN`] are never called typos.
const MAX_TYPO_EDITS: usize = 2;
const MIN_TYPO_LEN: usize = 5;

/// One warning per option set in the files that the daemon does not read and that
/// looks meant for it.
pub fn unknown_option_warnings(raw: &RawConfig) -> Vec<String> {
    let mut out = Vec::new();
    for group in super::options::groups() {
        if REPORTED_ELSEWHERE.contains(&group) {
            continue;
        }
        let known = known_names(group);
        for key in raw.keys(group) {
            if known.contains(&key.as_str()) {
                continue;
            }
            let closest = closest(&key, &known);
            if group == OWN_GROUP {
                let hint = closest
                    .map(|(name, _)| format!(" (did you mean {name}?)"))
                    .unwrap_or_default();
                out.push(format!(
                    "option [{group}] {key} is not an option of nova-scheduler-rs and is \
                     ignored{hint}"
                ));
            } else if let Some((name, _)) =
                closest.filter(|(_, edits)| *edits <= MAX_TYPO_EDITS && key.len() >= MIN_TYPO_LEN)
            {
                out.push(format!(
                    "option [{group}] {key} is not read by nova-scheduler-rs (did you mean \
                     {name}?); it is ignored"
                ));
            }
        }
    }
    out
}

/// The names read in `group`: its options and the deprecated names read for them.
fn known_names(group: &str) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = OPTIONS
        .iter()
        .filter(|o| o.group == group)
        .map(|o| o.name)
        .collect();
    names.extend(
        OPTIONS
            .iter()
            .flat_map(|o| o.deprecated.iter())
            .filter(|(g, _)| *g == group)
            .map(|(_, name)| *name),
    );
    names
}

/// The read name fewest edits away from `key`, with the edits.
fn closest(key: &str, known: &[&'static str]) -> Option<(&'static str, usize)> {
    known
        .iter()
        .map(|name| (*name, edit_distance(key, name)))
        .min_by_key(|(_, edits)| *edits)
        .filter(|(name, edits)| *edits <= (name.len() / 3).max(MAX_TYPO_EDITS))
}

/// Levenshtein distance with adjacent transpositions counted as one edit (the
/// commonest typo); written here because no crate the daemon uses exports one.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warnings(ini: &str) -> Vec<String> {
        let mut raw = RawConfig::new();
        raw.add_str("<string>", ini).unwrap();
        unknown_option_warnings(&raw)
    }

    #[test]
    fn edits_count_a_swap_as_one() {
        assert_eq!(edit_distance("http_listen", "http_listen"), 0);
        assert_eq!(edit_distance("http_lisen", "http_listen"), 1);
        assert_eq!(edit_distance("htpt_listen", "http_listen"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn every_unknown_option_of_our_group_is_named_with_the_closest() {
        let w = warnings("[nova_scheduler_rs]\nhttp_lisen = 127.0.0.1:9101\nfrobnicate = 1\n");
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w.iter()
                .any(|l| l.contains("[nova_scheduler_rs] http_lisen")
                    && l.contains("did you mean http_listen?")),
            "{w:?}"
        );
        assert!(
            w.iter().any(
                |l| l.contains("[nova_scheduler_rs] frobnicate") && !l.contains("did you mean")
            ),
            "{w:?}"
        );
    }

    #[test]
    fn a_shared_group_names_only_likely_typos() {
        // enabled_filter: a typo of a read option; my_ip and instances_path belong to
        // other nova services and are no concern of the scheduler's.
        let w = warnings(
            "[DEFAULT]\nmy_ip = 10.0.0.1\ninstances_path = /var/lib/nova\n\
             [filter_scheduler]\nenabled_filter = ComputeFilter\nenabled_filters = ComputeFilter\n",
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("[filter_scheduler] enabled_filter is not read"),
            "{w:?}"
        );
        assert!(w[0].contains("did you mean enabled_filters?"), "{w:?}");
    }

    #[test]
    fn deprecated_names_that_are_read_are_known() {
        let deprecated: Vec<(&str, &str)> = OPTIONS
            .iter()
            .flat_map(|o| o.deprecated.iter().copied())
            .collect();
        let ini: String = deprecated
            .iter()
            .map(|(g, n)| format!("[{g}]\n{n} = 1\n"))
            .collect();
        let w = warnings(&ini);
        assert!(w.is_empty(), "{w:?}");
    }
}
