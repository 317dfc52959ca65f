// SPDX-License-Identifier: Apache-2.0
//! The plugin ABI, version 1 (docs/wasm-plugins.md): the input a module is given,
//! one buffer per call, and how its answer is read. Pure: no wasmtime here.
//!
//! The input is a header, a table of column descriptors and the columns, all
//! little-endian. Hosts are rows of the host columns (ids below 100); the distinct
//! aggregates of those hosts are rows of the aggregate columns (ids from 100), and a
//! host's `aggregates` column lists its aggregate rows. A plugin finds a column by
//! its id, so later versions add columns without moving the ones here.

use crate::model::{Aggregate, HostState};
use std::collections::HashMap;
use std::sync::Arc;

/// `NSRS`, the first four bytes of every input.
pub const MAGIC: [u8; 4] = *b"NSRS";
pub const ABI_VERSION: u32 = 1;

/// Column types.
pub const TYPE_I64: u32 = 1;
pub const TYPE_F64: u32 = 2;
/// Per row `(start u32, len u32)`: `len` UTF-8 bytes at `start` of the input.
pub const TYPE_STR: u32 = 3;
/// Per row `(start u32, count u32)`: `count` u32 values at `start` of the input.
pub const TYPE_U32_LIST: u32 = 4;

/// A string column of the hosts.
type StrColumn = (u32, &'static str, for<'h> fn(&'h HostState) -> &'h str);
/// An i64 column of the hosts.
type I64Column = (u32, &'static str, fn(&HostState) -> i64);
/// An f64 column of the hosts.
type F64Column = (u32, &'static str, fn(&HostState) -> f64);

/// The host string columns: `(id, name, value)`.
pub const HOST_STR_COLUMNS: &[StrColumn] = &[
    (1, "host", |h| &h.host),
    (2, "nodename", |h| &h.nodename),
    (3, "uuid", |h| h.uuid.as_deref().unwrap_or("")),
    (4, "hypervisor_type", |h| {
        h.hypervisor_type.as_deref().unwrap_or("")
    }),
    (5, "cell_uuid", |h| &h.cell_uuid),
];

/// The id of the host column listing each host's aggregate rows.
pub const HOST_AGGREGATES_COLUMN: u32 = 6;

/// The host i64 columns.
pub const HOST_I64_COLUMNS: &[I64Column] = &[
    (10, "free_ram_mb", |h| h.free_ram_mb),
    (11, "total_usable_ram_mb", |h| h.total_usable_ram_mb),
    (12, "free_disk_mb", |h| h.free_disk_mb),
    (13, "total_usable_disk_gb", |h| h.total_usable_disk_gb),
    (14, "vcpus_total", |h| h.vcpus_total),
    (15, "vcpus_used", |h| h.vcpus_used),
    (16, "num_instances", |h| h.num_instances),
    (17, "num_io_ops", |h| h.num_io_ops),
    (18, "failed_builds", |h| h.failed_builds),
    (19, "hypervisor_version", |h| {
        h.hypervisor_version.unwrap_or(-1)
    }),
    (20, "updated", |h| h.updated.map_or(-1, |t| t.timestamp())),
];

/// The host f64 columns.
pub const HOST_F64_COLUMNS: &[F64Column] = &[
    (30, "cpu_allocation_ratio", |h| h.cpu_allocation_ratio),
    (31, "ram_allocation_ratio", |h| h.ram_allocation_ratio),
    (32, "disk_allocation_ratio", |h| h.disk_allocation_ratio),
];

/// The aggregate columns: id, uuid, name, metadata (a JSON object of strings).
pub const AGGREGATE_COLUMNS: &[(u32, u32, &str)] = &[
    (100, TYPE_I64, "id"),
    (101, TYPE_STR, "uuid"),
    (102, TYPE_STR, "name"),
    (103, TYPE_STR, "metadata"),
];

const HEADER_BYTES: usize = 28;
const DESCRIPTOR_BYTES: usize = 16;

/// Which columns a call's input carries: bit `id` set (every id is below 128).
/// A module that exports `nsrs_columns` is given only the ones it names; the
/// rest of the input is the same, so a module finds its columns as it always does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnSet(u128);

impl ColumnSet {
    /// Every column of this ABI.
    pub fn all() -> Self {
        let ids = HOST_STR_COLUMNS
            .iter()
            .map(|c| c.0)
            .chain([HOST_AGGREGATES_COLUMN])
            .chain(HOST_I64_COLUMNS.iter().map(|c| c.0))
            .chain(HOST_F64_COLUMNS.iter().map(|c| c.0))
            .chain(AGGREGATE_COLUMNS.iter().map(|c| c.0));
        ColumnSet(ids.fold(0, |bits, id| bits | 1 << id))
    }

    /// The columns named by `ids`; an id this ABI does not define is an error.
    pub fn of(ids: &[u32]) -> Result<Self, String> {
        let all = Self::all();
        let mut bits = 0u128;
        for &id in ids {
            if id >= 128 || all.0 & 1 << id == 0 {
                return Err(format!(
                    "asks for column {id}, which ABI {ABI_VERSION} does not define"
                ));
            }
            bits |= 1 << id;
        }
        Ok(ColumnSet(bits))
    }

    pub fn has(self, id: u32) -> bool {
        id < 128 && self.0 & 1 << id != 0
    }

    /// Whether the aggregates are read: the host column listing them, or any of theirs.
    fn aggregates(self) -> bool {
        self.has(HOST_AGGREGATES_COLUMN) || AGGREGATE_COLUMNS.iter().any(|c| self.has(c.0))
    }
}

/// One call's input: `hosts` in the list's order and the request's JSON.
pub fn encode(hosts: &[&HostState], request_json: &str) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(&mut out, hosts, request_json, ColumnSet::all());
    out
}

/// [`encode`] into `out` (cleared first), so a caller can keep one buffer, with
/// only the `wanted` columns.
///
/// One pass over the hosts, each host's values written to every column at once:
/// host states are large and scattered, and a pass per column would fetch each
/// one from memory twenty times over. Reading them is most of the cost, so a
/// column nobody asked for is not read at all.
pub fn encode_into(out: &mut Vec<u8>, hosts: &[&HostState], request_json: &str, wanted: ColumnSet) {
    let n = hosts.len();
    let strs: Vec<&StrColumn> = HOST_STR_COLUMNS
        .iter()
        .filter(|c| wanted.has(c.0))
        .collect();
    let list = wanted.has(HOST_AGGREGATES_COLUMN);
    let i64s: Vec<&I64Column> = HOST_I64_COLUMNS
        .iter()
        .filter(|c| wanted.has(c.0))
        .collect();
    let f64s: Vec<&F64Column> = HOST_F64_COLUMNS
        .iter()
        .filter(|c| wanted.has(c.0))
        .collect();
    let aggregate_columns: Vec<&(u32, u32, &str)> = AGGREGATE_COLUMNS
        .iter()
        .filter(|c| wanted.has(c.0))
        .collect();
    let read_aggregates = wanted.aggregates();
    // Slots of the fixed-size host columns, in this order.
    let list_slot = strs.len();
    let first_i64 = list_slot + usize::from(list);
    let first_f64 = first_i64 + i64s.len();
    let host_columns = first_f64 + f64s.len();
    let columns = host_columns + aggregate_columns.len();
    out.clear();
    out.extend_from_slice(&MAGIC);
    put_u32(out, ABI_VERSION);
    put_u32(out, n as u32);
    put_u32(out, 0); // the aggregates, counted below
    put_u32(out, 0); // the request's start, known at the end
    put_u32(out, request_json.len() as u32);
    put_u32(out, columns as u32);
    debug_assert_eq!(out.len(), HEADER_BYTES);
    let descriptors_at = out.len();
    out.resize(descriptors_at + columns * DESCRIPTOR_BYTES, 0);
    align8(out);
    // The host columns: fixed size, one after the other.
    let fixed_at = out.len();
    let column_at = |k: usize| fixed_at + k * n * 8;
    out.resize(fixed_at + host_columns * n * 8, 0);

    // Hosts share their aggregates' `Arc`s: one row per distinct aggregate.
    let mut aggregate_rows: HashMap<*const Aggregate, u32, BuildAddressHasher> = HashMap::default();
    let mut aggregates: Vec<&Arc<Aggregate>> = Vec::new();
    let mut lists: Vec<u32> = Vec::with_capacity(if list { n * 2 } else { 0 });
    let mut heap: Vec<u8> = Vec::with_capacity(n * 16 * strs.len());
    let put = |out: &mut Vec<u8>, k: usize, i: usize, bytes: [u8; 8]| {
        let at = column_at(k) + i * 8;
        out[at..at + 8].copy_from_slice(&bytes);
    };
    let pair = |a: u32, b: u32| {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&a.to_le_bytes());
        bytes[4..].copy_from_slice(&b.to_le_bytes());
        bytes
    };
    for (i, h) in hosts.iter().enumerate() {
        for (k, (_, _, value)) in strs.iter().enumerate() {
            let text = value(h);
            // Relative to the string heap until its place is known.
            put(out, k, i, pair(heap.len() as u32, text.len() as u32));
            heap.extend_from_slice(text.as_bytes());
        }
        if read_aggregates {
            let first = lists.len() as u32;
            for agg in &h.aggregates {
                let row = *aggregate_rows.entry(Arc::as_ptr(agg)).or_insert_with(|| {
                    aggregates.push(agg);
                    (aggregates.len() - 1) as u32
                });
                if list {
                    lists.push(row);
                }
            }
            if list {
                put(out, list_slot, i, pair(first, h.aggregates.len() as u32));
            }
        }
        for (k, (_, _, value)) in i64s.iter().enumerate() {
            put(out, first_i64 + k, i, value(h).to_le_bytes());
        }
        for (k, (_, _, value)) in f64s.iter().enumerate() {
            put(out, first_f64 + k, i, value(h).to_le_bytes());
        }
    }
    let lists_at = out.len() as u32;
    for row in &lists {
        put_u32(out, *row);
    }
    let heap_at = out.len() as u32;
    out.extend_from_slice(&heap);
    // The relative starts made absolute.
    let rebase = |out: &mut Vec<u8>, k: usize, base: u32, scale: u32| {
        for i in 0..n {
            let at = column_at(k) + i * 8;
            let relative = u32::from_le_bytes(out[at..at + 4].try_into().unwrap_or_default());
            out[at..at + 4].copy_from_slice(&(base + relative * scale).to_le_bytes());
        }
    };
    for k in 0..strs.len() {
        rebase(out, k, heap_at, 1);
    }
    if list {
        rebase(out, list_slot, lists_at, 4);
    }

    let mut column = 0;
    let mut describe = |out: &mut Vec<u8>, id: u32, kind: u32, start: usize, len: usize| {
        let at = descriptors_at + column * DESCRIPTOR_BYTES;
        out[at..at + 4].copy_from_slice(&id.to_le_bytes());
        out[at + 4..at + 8].copy_from_slice(&kind.to_le_bytes());
        out[at + 8..at + 12].copy_from_slice(&(start as u32).to_le_bytes());
        out[at + 12..at + 16].copy_from_slice(&(len as u32).to_le_bytes());
        column += 1;
    };
    for (k, (id, _, _)) in strs.iter().enumerate() {
        describe(out, *id, TYPE_STR, column_at(k), n * 8);
    }
    if list {
        describe(
            out,
            HOST_AGGREGATES_COLUMN,
            TYPE_U32_LIST,
            column_at(list_slot),
            n * 8,
        );
    }
    for (k, (id, _, _)) in i64s.iter().enumerate() {
        describe(out, *id, TYPE_I64, column_at(first_i64 + k), n * 8);
    }
    for (k, (id, _, _)) in f64s.iter().enumerate() {
        describe(out, *id, TYPE_F64, column_at(first_f64 + k), n * 8);
    }
    for &&(id, kind, name) in &aggregate_columns {
        align8(out);
        let start = out.len();
        match name {
            "id" => {
                for a in &aggregates {
                    out.extend_from_slice(&a.id.to_le_bytes());
                }
            }
            "metadata" => {
                let texts: Vec<String> = aggregates
                    .iter()
                    .map(|a| serde_json::to_string(&a.metadata).unwrap_or_default())
                    .collect();
                put_strings(out, texts.iter().map(String::as_str));
            }
            "uuid" => put_strings(out, aggregates.iter().map(|a| a.uuid.as_str())),
            _ => put_strings(out, aggregates.iter().map(|a| a.name.as_str())),
        }
        let len = out.len() - start;
        describe(out, id, kind, start, len);
    }
    out[12..16].copy_from_slice(&(aggregates.len() as u32).to_le_bytes());
    let request_start = out.len() as u32;
    out[16..20].copy_from_slice(&request_start.to_le_bytes());
    out.extend_from_slice(request_json.as_bytes());
}

/// Hashes an address (the map's keys are `Arc` pointers): one multiply, not SipHash.
#[derive(Default, Clone, Copy)]
struct BuildAddressHasher;

#[derive(Default)]
struct AddressHasher(u64);

impl std::hash::BuildHasher for BuildAddressHasher {
    type Hasher = AddressHasher;
    fn build_hasher(&self) -> AddressHasher {
        AddressHasher(0)
    }
}

impl std::hash::Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_usize(&mut self, v: usize) {
        self.0 = (v as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn align8(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(8) {
        out.push(0);
    }
}

/// The `(start, len)` index of every row, then the bytes.
fn put_strings<'a>(out: &mut Vec<u8>, rows: impl ExactSizeIterator<Item = &'a str> + Clone) {
    let index_at = out.len();
    out.resize(index_at + rows.len() * 8, 0);
    for (i, text) in rows.enumerate() {
        let start = out.len() as u32;
        out.extend_from_slice(text.as_bytes());
        let at = index_at + i * 8;
        out[at..at + 4].copy_from_slice(&start.to_le_bytes());
        out[at + 4..at + 8].copy_from_slice(&(text.len() as u32).to_le_bytes());
    }
}

/// A filter's answer: one verdict per host, and the reason of each rejected one.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdicts {
    pub passes: Vec<bool>,
    /// One per host; `Some` for a rejected host.
    pub reasons: Vec<Option<String>>,
}

/// Reads a filter's answer over `n` hosts: a pass bitmap of `ceil(n / 8)` bytes
/// (bit `i % 8` of byte `i / 8`, set: host `i` passes), then for each rejected host
/// in order a u32 length and that many bytes of UTF-8 reason; nothing after.
/// With `keep_reasons` false the reasons are checked but not kept (all `None`).
pub fn decode_verdicts(bytes: &[u8], n: usize, keep_reasons: bool) -> Result<Verdicts, String> {
    let bitmap = n.div_ceil(8);
    if bytes.len() < bitmap {
        return Err(format!(
            "answered {} bytes, fewer than the {bitmap}-byte pass bitmap of {n} hosts",
            bytes.len()
        ));
    }
    let passes: Vec<bool> = (0..n).map(|i| bytes[i / 8] & (1 << (i % 8)) != 0).collect();
    let mut rest = &bytes[bitmap..];
    let mut reasons = Vec::with_capacity(n);
    for (i, pass) in passes.iter().enumerate() {
        if *pass {
            reasons.push(None);
            continue;
        }
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(format!("the answer ends before the reason for host {i}"));
        };
        let len = u32::from_le_bytes(*len) as usize;
        if tail.len() < len {
            return Err(format!("the reason for host {i} runs past the answer"));
        }
        let text = std::str::from_utf8(&tail[..len])
            .map_err(|_| format!("the reason for host {i} is not UTF-8"))?;
        reasons.push(keep_reasons.then(|| cut(text, 512).to_string()));
        rest = &tail[len..];
    }
    if !rest.is_empty() {
        return Err(format!(
            "{} bytes after the last reason (a bitmap for a different number of hosts?)",
            rest.len()
        ));
    }
    Ok(Verdicts { passes, reasons })
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Reads a weigher's answer over `n` hosts: `n` finite little-endian f64.
pub fn decode_weights(bytes: &[u8], n: usize) -> Result<Vec<f64>, String> {
    if bytes.len() != n * 8 {
        return Err(format!(
            "answered {} bytes for {n} hosts (8 per host expected)",
            bytes.len()
        ));
    }
    let weights: Vec<f64> = bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect();
    match weights.iter().position(|w| !w.is_finite()) {
        Some(i) => Err(format!("the weight of host {i} is {}", weights[i])),
        None => Ok(weights),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    /// The column `id`'s `(type, start, len)`.
    fn column(b: &[u8], id: u32) -> (u32, usize, usize) {
        let count = u32_at(b, 24) as usize;
        (0..count)
            .map(|c| HEADER_BYTES + c * DESCRIPTOR_BYTES)
            .find(|&at| u32_at(b, at) == id)
            .map(|at| {
                (
                    u32_at(b, at + 4),
                    u32_at(b, at + 8) as usize,
                    u32_at(b, at + 12) as usize,
                )
            })
            .unwrap()
    }

    fn string(b: &[u8], id: u32, row: usize) -> &str {
        let (kind, start, _) = column(b, id);
        assert_eq!(kind, TYPE_STR);
        let at = start + row * 8;
        let (s, l) = (u32_at(b, at) as usize, u32_at(b, at + 4) as usize);
        std::str::from_utf8(&b[s..s + l]).unwrap()
    }

    #[test]
    fn hosts_their_aggregates_and_the_request_are_laid_out_as_documented() {
        let rack = Arc::new(Aggregate {
            id: 7,
            name: "rack-1".into(),
            metadata: [("rack".to_string(), "r1".to_string())].into(),
            ..Default::default()
        });
        let mut a = HostState {
            host: "a".into(),
            nodename: "a".into(),
            ..Default::default()
        };
        a.free_ram_mb = 1024;
        a.aggregates = vec![Arc::clone(&rack)];
        let mut b = HostState {
            host: "b".into(),
            nodename: "b-node".into(),
            ..Default::default()
        };
        b.free_ram_mb = -5;
        b.ram_allocation_ratio = 1.5;
        b.aggregates = vec![Arc::clone(&rack)];
        let input = encode(&[&a, &b], r#"{"x":1}"#);
        assert_eq!(&input[..4], b"NSRS");
        assert_eq!(u32_at(&input, 4), 1);
        assert_eq!(u32_at(&input, 8), 2);
        assert_eq!(u32_at(&input, 12), 1, "one aggregate shared by both hosts");
        let (req_at, req_len) = (u32_at(&input, 16) as usize, u32_at(&input, 20) as usize);
        assert_eq!(&input[req_at..req_at + req_len], br#"{"x":1}"#);
        assert_eq!(string(&input, 2, 1), "b-node");
        let (kind, start, len) = column(&input, 10);
        assert_eq!((kind, len), (TYPE_I64, 16));
        assert_eq!(start % 8, 0);
        let ram: Vec<i64> = input[start..start + len]
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(ram, vec![1024, -5]);
        let (_, start, _) = column(&input, 31);
        assert_eq!(
            f64::from_le_bytes(input[start + 8..start + 16].try_into().unwrap()),
            1.5
        );
        let (kind, start, _) = column(&input, 6);
        assert_eq!(kind, TYPE_U32_LIST);
        let (s, count) = (
            u32_at(&input, start + 8) as usize,
            u32_at(&input, start + 12),
        );
        assert_eq!((count, u32_at(&input, s)), (1, 0));
        assert_eq!(string(&input, 103, 0), r#"{"rack":"r1"}"#);
        assert_eq!(string(&input, 102, 0), "rack-1");
    }

    #[test]
    fn only_the_wanted_columns_are_carried() {
        let rack = Arc::new(Aggregate {
            id: 7,
            metadata: [("rack".to_string(), "r1".to_string())].into(),
            ..Default::default()
        });
        let mut a = HostState {
            host: "a".into(),
            ..Default::default()
        };
        a.num_instances = 4;
        a.aggregates = vec![Arc::clone(&rack), Arc::clone(&rack)];
        let mut input = Vec::new();
        let wanted = ColumnSet::of(&[16, 103]).unwrap();
        encode_into(&mut input, &[&a], "{}", wanted);
        assert_eq!(u32_at(&input, 24), 2, "two columns");
        assert_eq!(
            u32_at(&input, 12),
            1,
            "the aggregates, though their list is not asked for"
        );
        assert_eq!(string(&input, 103, 0), r#"{"rack":"r1"}"#);
        let (kind, start, len) = column(&input, 16);
        assert_eq!((kind, len), (TYPE_I64, 8));
        assert_eq!(
            i64::from_le_bytes(input[start..start + 8].try_into().unwrap()),
            4
        );
        // Nothing read, nothing carried.
        let bare = ColumnSet::of(&[]).unwrap();
        encode_into(&mut input, &[&a], "{}", bare);
        assert_eq!((u32_at(&input, 12), u32_at(&input, 24)), (0, 0));
        assert!(ColumnSet::of(&[7]).is_err());
        assert!(ColumnSet::of(&[200]).is_err());
        assert!(ColumnSet::all().has(32) && ColumnSet::all().has(103) && !ColumnSet::all().has(7));
    }

    #[test]
    fn answers_are_read_strictly() {
        // Hosts 0 and 2 pass, 1 is rejected with a reason.
        let mut answer = vec![0b101u8];
        answer.extend_from_slice(&3u32.to_le_bytes());
        answer.extend_from_slice(b"why");
        let v = decode_verdicts(&answer, 3, true).unwrap();
        assert_eq!(
            decode_verdicts(&answer, 3, false).unwrap().reasons,
            vec![None; 3]
        );
        assert_eq!(v.passes, vec![true, false, true]);
        assert_eq!(v.reasons[1].as_deref(), Some("why"));
        assert!(
            decode_verdicts(&answer[..1], 3, false).is_err(),
            "reason missing"
        );
        answer.push(0);
        assert!(decode_verdicts(&answer, 3, false).is_err(), "trailing byte");
        assert!(decode_verdicts(&[], 1, true).is_err());
        assert_eq!(cut("ééé", 3), "é");
        assert!(decode_weights(&1.0f64.to_le_bytes(), 2).is_err());
        assert!(decode_weights(&f64::NAN.to_le_bytes(), 1).is_err());
        assert_eq!(decode_weights(&2.5f64.to_le_bytes(), 1).unwrap(), vec![2.5]);
    }
}
