// SPDX-License-Identifier: Apache-2.0
//! `json.dumps` as Python writes it (`", "` / `": "` separators, ASCII-only output).
//!
//! nova puts the allocation request into `Selection.allocation_request` as a JSON
//! *string* made by `jsonutils.dumps`; writing it byte-for-byte the same keeps our
//! replies indistinguishable from nova's.

use serde_json::Value;
use std::fmt::Write;

pub fn dumps(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str(out, k);
                out.push_str(": ");
                write_value(out, v);
            }
            out.push('}');
        }
    }
}

fn write_number(out: &mut String, n: &serde_json::Number) {
    if n.is_f64() {
        let f = n.as_f64().unwrap_or(0.0);
        // Python's repr of a float always carries a decimal point or exponent.
        if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e16 {
            let _ = write!(out, "{f:.1}");
        } else {
            let _ = write!(out, "{f}");
        }
    } else {
        let _ = write!(out, "{n}");
    }
}

fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::dumps;
    use serde_json::json;

    #[test]
    fn matches_python_separators_and_order() {
        let v = json!({"allocations": {"cn": {"resources": {"VCPU": 2, "DISK_GB": 20}}}, "mappings": {"": ["cn"]}});
        assert_eq!(
            dumps(&v),
            r#"{"allocations": {"cn": {"resources": {"VCPU": 2, "DISK_GB": 20}}}, "mappings": {"": ["cn"]}}"#
        );
    }

    #[test]
    fn floats_and_non_ascii_as_python() {
        assert_eq!(
            dumps(&json!([1.0, 0.5, "é", null, true])),
            r#"[1.0, 0.5, "\u00e9", null, true]"#
        );
    }
}
