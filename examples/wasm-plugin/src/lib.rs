// SPDX-License-Identifier: Apache-2.0
//! `mycloud_rack`: an example plugin for nova-scheduler-rs, plugin ABI 1
//! (docs/wasm-plugins.md). One module, two plugins of the same name:
//!
//! - the filter passes a host only when one of its aggregates has the `rack`
//!   metadata the request asks for: the flavor's extra spec `mycloud:rack`, else the
//!   scheduler hint `rack`; a request that asks for no rack passes every host;
//! - the weigher spreads across racks: a host weighs minus the instances already
//!   on every candidate host of its racks (so the emptiest rack wins), a thing only a
//!   plugin that sees the whole candidate list at once can compute.
//!
//! Enable it with `wasm_plugins = /path/to/mycloud_rack.wasm`, then `mycloud_rack`
//! in `[filter_scheduler] enabled_filters` and/or `weight_classes`.

mod input;

use input::Input;
use std::cell::RefCell;

thread_local! {
    /// Where the daemon writes each call's input (`nsrs_alloc`).
    static INPUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// Where each answer is left for the daemon to read.
    static OUTPUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

#[unsafe(no_mangle)]
pub extern "C" fn nsrs_abi_version() -> i32 {
    1
}

/// Bit 0: run on a rebuild (nova's `RUN_ON_REBUILD`); bit 1: run only for the
/// request's first instance. A rack does not change on a rebuild: keep the host.
#[unsafe(no_mangle)]
pub extern "C" fn nsrs_flags() -> i32 {
    0
}

/// The columns each plugin reads, so the daemon gathers only these: for the
/// filter (0) the hosts' aggregates and their metadata, for the weigher (1) also
/// the instances on each host.
#[unsafe(no_mangle)]
pub extern "C" fn nsrs_columns(kind: i32) -> i64 {
    static FILTER: [u32; 2] = [6, 103];
    static WEIGHER: [u32; 3] = [6, 16, 103];
    let ids: &[u32] = if kind == 0 { &FILTER } else { &WEIGHER };
    ((ids.as_ptr() as u32 as i64) << 32) | (ids.len() * 4) as i64
}

#[unsafe(no_mangle)]
pub extern "C" fn nsrs_alloc(len: i32) -> i32 {
    INPUT.with_borrow_mut(|buf| {
        // Grown, never cleared: the daemon writes every byte of the input.
        let len = len.max(0) as usize;
        if buf.len() < len {
            buf.resize(len, 0);
        }
        buf.as_mut_ptr() as i32
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nsrs_filter(_at: i32, len: i32) -> i64 {
    INPUT.with_borrow(|bytes| {
        let input = Input::new(&bytes[..len as usize]);
        let (wanted, with_reasons) = wanted_rack(&input);
        let racks = Racks::of(&input);
        let n = input.hosts();
        let mut out = vec![0u8; n.div_ceil(8)];
        let Some(wanted) = wanted else {
            out.fill(0xff);
            return answer(out);
        };
        // The rack asked for, as a rack number; no aggregate in it: no host passes.
        let wanted_index = racks.names.iter().position(|r| *r == wanted);
        let mut reasons = Vec::new();
        for i in 0..n {
            let mut in_racks = racks.of_host(&input, i);
            if wanted_index.is_some_and(|w| in_racks.any(|r| r == w)) {
                out[i / 8] |= 1 << (i % 8);
                continue;
            }
            let reason = match with_reasons {
                false => String::new(),
                true => {
                    let mut names: Vec<&str> =
                        racks.of_host(&input, i).map(|r| racks.names[r]).collect();
                    names.sort_unstable();
                    names.dedup();
                    match names.is_empty() {
                        true => format!("host is in no rack; the request asks for rack {wanted}"),
                        false => format!(
                            "host is in rack {}; the request asks for rack {wanted}",
                            names.join(",")
                        ),
                    }
                }
            };
            reasons.extend_from_slice(&(reason.len() as u32).to_le_bytes());
            reasons.extend_from_slice(reason.as_bytes());
        }
        out.extend_from_slice(&reasons);
        answer(out)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nsrs_weigh(_at: i32, len: i32) -> i64 {
    INPUT.with_borrow(|bytes| {
        let input = Input::new(&bytes[..len as usize]);
        let racks = Racks::of(&input);
        let n = input.hosts();
        // Instances per rack over the whole list (a host in two aggregates of one
        // rack counts once).
        let mut load = vec![0i64; racks.names.len()];
        let instances = input.i64_column(16);
        for (i, &count) in instances.iter().enumerate().take(n) {
            for_each_rack(&racks, &input, i, |r| load[r] += count);
        }
        let mut out = Vec::with_capacity(n * 8);
        for i in 0..n {
            let mut total = 0;
            for_each_rack(&racks, &input, i, |r| total += load[r]);
            out.extend_from_slice(&(-(total as f64)).to_le_bytes());
        }
        answer(out)
    })
}

/// Calls `f` once per distinct rack of host `i`.
fn for_each_rack(racks: &Racks<'_>, input: &Input<'_>, i: usize, mut f: impl FnMut(usize)) {
    let mut seen: [usize; 8] = [usize::MAX; 8];
    let mut count = 0;
    for r in racks.of_host(input, i) {
        if seen[..count.min(8)].contains(&r) {
            continue;
        }
        if count < 8 {
            seen[count] = r;
        }
        count += 1;
        f(r);
    }
}

/// The racks of a call: each distinct `rack` value of the aggregates, numbered.
struct Racks<'a> {
    names: Vec<&'a str>,
    /// Per aggregate row, its rack's number.
    of_aggregate: Vec<Option<usize>>,
}

impl<'a> Racks<'a> {
    fn of(input: &Input<'a>) -> Self {
        let mut names: Vec<&'a str> = Vec::new();
        let of_aggregate = (0..input.aggregates())
            .map(|a| {
                let rack = rack_of(input.string(103, a))?;
                Some(names.iter().position(|n| *n == rack).unwrap_or_else(|| {
                    names.push(rack);
                    names.len() - 1
                }))
            })
            .collect();
        Racks {
            names,
            of_aggregate,
        }
    }

    /// The rack numbers of host `i`'s aggregates.
    fn of_host<'s>(&'s self, input: &'s Input<'_>, i: usize) -> impl Iterator<Item = usize> + 's {
        input
            .list(6, i)
            .filter_map(|a| self.of_aggregate[a as usize])
    }
}

/// The rack the request asks for.
/// The rack the request asks for, and whether the daemon wants the reasons for
/// rejected hosts (only when it explains a decision; otherwise they are left empty).
fn wanted_rack(input: &Input<'_>) -> (Option<String>, bool) {
    let Ok(request) = serde_json::from_str::<serde_json::Value>(input.request()) else {
        return (None, false);
    };
    let from_flavor = request["flavor"]["extra_specs"]["mycloud:rack"].as_str();
    let from_hint = request["scheduler_hints"]["rack"][0].as_str();
    let wanted = from_flavor.or(from_hint).map(str::to_string);
    (wanted, request["reasons"].as_bool().unwrap_or(true))
}

/// The `rack` value of an aggregate's metadata (a JSON object of strings).
fn rack_of(metadata: &str) -> Option<&str> {
    // The value is a plain string: find it without building a map per aggregate.
    let at = metadata.find("\"rack\":\"")? + "\"rack\":\"".len();
    let rest = &metadata[at..];
    Some(&rest[..rest.find('"')?])
}

/// Leaves `out` for the daemon and tells it where: `(pointer << 32) | length`.
fn answer(out: Vec<u8>) -> i64 {
    OUTPUT.with_borrow_mut(|kept| {
        *kept = out;
        ((kept.as_ptr() as u32 as i64) << 32) | kept.len() as u32 as i64
    })
}
