// SPDX-License-Identifier: Apache-2.0
//! `log_date_format`: Python's `time.strftime` formats (glibc's) as chrono formats,
//! and the `FormatTime` of the text lines.
//!
//! Most directives mean the same in both. The differences handled here: `%f`
//! (microseconds in Python's `datetime`) is chrono's `%6f`; glibc's `E`/`O` modifiers
//! (`%Ey`, `%Od`) are dropped; a directive chrono does not know is written literally,
//! as glibc does, so a format never fails at run time.

use chrono::format::{Item, StrftimeItems};
use chrono::{DateTime, Local};
use std::fmt;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

/// Whether chrono accepts `spec` (one directive) as a whole.
fn chrono_knows(spec: &str) -> bool {
    StrftimeItems::new(spec).all(|item| !matches!(item, Item::Error))
}

/// A Python/glibc strftime format as a chrono format that never fails.
pub fn to_chrono(python: &str) -> String {
    let mut out = String::with_capacity(python.len() + 4);
    let mut chars = python.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = String::from("%");
        while let Some(&flag) = chars.peek() {
            if matches!(flag, '-' | '_' | '0' | '^' | '#') {
                spec.push(flag);
                chars.next();
            } else {
                break;
            }
        }
        if matches!(chars.peek(), Some('E' | 'O')) {
            chars.next();
        }
        match chars.next() {
            Some('f') if spec == "%" => out.push_str("%6f"),
            Some(d) => {
                spec.push(d);
                if chrono_knows(&spec) {
                    out.push_str(&spec);
                } else {
                    out.push_str("%%");
                    out.push_str(&spec[1..]);
                }
            }
            None => {
                out.push_str("%%");
                out.push_str(&spec[1..]);
            }
        }
    }
    out
}

/// `%(asctime)s` of a time: its `log_date_format` rendering.
pub fn asctime(time: &DateTime<Local>, chrono_format: &str) -> String {
    time.format(chrono_format).to_string()
}

/// The text lines' timestamp: `log_date_format` in local time followed by `.mmm`,
/// as oslo's `%(asctime)s.%(msecs)03d`.
#[derive(Clone, Debug)]
pub struct PyTime {
    chrono_format: String,
}

impl PyTime {
    pub fn new(python_format: &str) -> Self {
        PyTime {
            chrono_format: to_chrono(python_format),
        }
    }
}

impl FormatTime for PyTime {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        let now = Local::now();
        write!(
            w,
            "{}.{:03}",
            asctime(&now, &self.chrono_format),
            now.timestamp_subsec_millis().min(999)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn render(python: &str) -> String {
        let t = Local
            .with_ymd_and_hms(2024, 3, 7, 9, 5, 2)
            .unwrap()
            .checked_add_signed(chrono::Duration::microseconds(123_456))
            .unwrap();
        asctime(&t, &to_chrono(python))
    }

    #[test]
    fn oslo_default_and_common_formats() {
        assert_eq!(render("%Y-%m-%d %H:%M:%S"), "2024-03-07 09:05:02");
        assert_eq!(render("%d/%b/%Y:%H:%M:%S"), "07/Mar/2024:09:05:02");
        assert_eq!(
            render("%y%m%d %I%p %j %a %A %B"),
            "240307 09AM 067 Thu Thursday March"
        );
        assert_eq!(render("%H:%M:%S.%f"), "09:05:02.123456");
        assert_eq!(render("%-d.%-m. %e"), "7.3.  7");
        assert_eq!(render("%F %T"), "2024-03-07 09:05:02");
        assert_eq!(render("100%% %Ey %Od"), "100% 24 07");
    }

    #[test]
    fn unknown_directives_are_literal_never_an_error() {
        assert_eq!(render("%Q %Y"), "%Q 2024");
        assert_eq!(render("%^a"), "%^a");
        assert_eq!(render("trailing %"), "trailing %");
        assert_eq!(render("no directives"), "no directives");
    }
}
