// SPDX-License-Identifier: Apache-2.0
//! Differential test: our NUMA placement against nova 34's own code.
//!
//! A seeded generator makes random host NUMA topologies (1–4 cells, SMT siblings
//! with Linux-style and offset numbering, shared/dedicated CPU splits, pinned CPUs,
//! page sizes with used and reserved pages, network affinity, older object versions,
//! allocation ratios, PCI pools per NUMA node) and random flavors/images
//! (`hw:numa_nodes`, manual `hw:numa_cpus.N`/`hw:numa_mem.N`, CPU and thread
//! policies, mixed `hw:cpu_dedicated_mask`, page sizes, emulator-thread isolation,
//! image equivalents). ONE long-lived Python process (`tests/oracle/numa_oracle.py`)
//! builds the instance topology with nova's `numa_get_constraints`, then, for 1–3
//! instances in a row, runs nova's `numa_fit_instance_to_host`, `NUMATopologyFilter`
//! on a real `HostState` (candidates kept, limits written) and
//! `HostState.consume_from_request` (fitted topology, host usage afterwards). We run
//! our fit, filter and consumption on the same inputs and compare everything: pass /
//! fail, surviving candidates, limits, the fitted cells (host cell ids, CPU pinning
//! in nova's dict order, page size, reserved CPUs), where nova raises, and each host
//! cell's pinned CPUs in Python set order, usage and pages after consumption.
//! A second generator checks the CPython set emulation directly. A third test,
//! `numa_and_pci_agree_with_nova`, makes requests with both a NUMA topology and PCI
//! requests (1–2 requests, all NUMA affinity policies, specific or any product, pools
//! on the host's cells, on no cell or on a cell the host lacks, sockets set, unset or
//! null) and compares the same steps plus the host's pools after each consumption.
//!
//! ```sh
//! cargo test --release --test differential differential_numa
//! NSRS_DIFF_SEED=7 NSRS_DIFF_NUMA_CASES=50000 NSRS_DIFF_NUMA_PCI_CASES=50000 \
//!     cargo test --release --test differential differential_numa -- --nocapture
//! ```
//! The instance topology is taken from nova (our side does not build it from extra
//! specs); cases where nova's `numa_get_constraints` rejects the flavor/image count
//! as "constraints_error" and are reported in the tally.

use chrono::Utc;
use nova_scheduler::filters::numa_topology_filter::NUMATopologyFilter;
use nova_scheduler::filters::{FilterRequest, HostFilter};
use nova_scheduler::host_fit;
use nova_scheduler::model::{Flavor, HostState, ImageMeta, RequestSpec};
use nova_scheduler::numa::fit::PciSupportCheck;
use nova_scheduler::numa::{
    numa_fit_instance_to_host, InstanceCell, InstanceTopology, Limits, NetworkMetadata, NumaError,
    NumaTopology, PciContext,
};
use nova_scheduler::pci::{self, ProviderMapping};
use nova_scheduler::py::set::PySet;
use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{RngExt, SeedableRng};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

const DEFAULT_SEED: u64 = 0x6e75_6d61;
const DEFAULT_CASES: usize = 10_000;
const DEFAULT_PYSET_CASES: usize = 3000;

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number"))
    })
}

fn chance(rng: &mut StdRng, p: f64) -> bool {
    rng.random_bool(p)
}

fn pick<T: Clone>(rng: &mut StdRng, items: &[T]) -> T {
    items.choose(rng).expect("non-empty").clone()
}

fn obj(name: &str, version: &str, data: Value) -> Value {
    json!({
        "nova_object.name": name,
        "nova_object.namespace": "nova",
        "nova_object.version": version,
        "nova_object.data": data,
    })
}

// ---------------------------------------------------------------------------------
// Host generator
// ---------------------------------------------------------------------------------

/// One host NUMA topology primitive (what `compute_nodes.numa_topology` holds).
fn gen_host_topology(rng: &mut StdRng) -> Value {
    let ncells = pick(rng, &[1, 1, 2, 2, 2, 3, 4]);
    let tpc = pick(rng, &[1, 1, 2, 2, 2, 4]);
    let cores = rng.random_range(1..=6usize);
    // How CPU ids are laid out: per-cell blocks, Linux-style (sibling = cpu + total
    // cores), or with big offsets that collide in Python's 8-slot tables.
    let layout = rng.random_range(0..3);
    let total_cores = ncells * cores;
    let offset = pick(rng, &[8usize, 16, 32, 64, 40]);
    let mut ids: Vec<i64> = (0..ncells as i64).collect();
    if chance(rng, 0.2) {
        ids = ids
            .iter()
            .map(|i| i * 2 + i64::from(chance(rng, 0.5)))
            .collect();
    }
    if chance(rng, 0.15) {
        ids.shuffle(rng);
    }
    let mut cells = Vec::new();
    for (ci, &cell_id) in ids.iter().enumerate() {
        let mut siblings: Vec<Vec<i64>> = Vec::new();
        for core in 0..cores {
            let global_core = ci * cores + core;
            let sib: Vec<i64> = (0..tpc)
                .map(|t| match layout {
                    0 => (global_core * tpc + t) as i64,
                    1 => (global_core + t * total_cores) as i64,
                    _ => (global_core + t * offset * (1 + ci)) as i64,
                })
                .collect();
            siblings.push(sib);
        }
        let all: Vec<i64> = siblings.iter().flatten().copied().collect();
        // shared / dedicated split
        let split = rng.random_range(0..5);
        let (cpuset, pcpuset): (Vec<i64>, Vec<i64>) = match split {
            0 => (all.clone(), all.clone()), // legacy vcpu_pin_set
            1 => (Vec::new(), all.clone()),
            2 => (all.clone(), Vec::new()),
            _ => {
                // whole cores to one side or the other
                let mut s = Vec::new();
                let mut p = Vec::new();
                for sib in &siblings {
                    if chance(rng, 0.4) {
                        s.extend(sib);
                    } else {
                        p.extend(sib);
                    }
                }
                (s, p)
            }
        };
        let mut sib_out: Vec<Vec<i64>> = if chance(rng, 0.5) {
            siblings.clone()
        } else {
            // restricted to the dedicated CPUs, as libvirt reports them
            siblings
                .iter()
                .map(|s| {
                    s.iter()
                        .copied()
                        .filter(|c| pcpuset.contains(c))
                        .collect::<Vec<_>>()
                })
                .filter(|s: &Vec<i64>| !s.is_empty())
                .collect()
        };
        if tpc == 1 && chance(rng, 0.3) {
            sib_out = all.iter().map(|&c| vec![c]).collect();
        }
        if chance(rng, 0.02) {
            sib_out = Vec::new();
        }
        for s in sib_out.iter_mut() {
            if chance(rng, 0.3) {
                s.reverse();
            }
        }
        let mut pinned: Vec<i64> = pcpuset
            .iter()
            .copied()
            .filter(|_| chance(rng, 0.25))
            .collect();
        if chance(rng, 0.5) {
            pinned.shuffle(rng);
        }
        let memory: i64 = pick(rng, &[512, 1024, 2048, 4096, 8192]);
        let memory_usage = if chance(rng, 0.4) {
            0
        } else {
            rng.random_range(0..=memory + memory / 4)
        };
        let cpu_usage = if chance(rng, 0.4) {
            0
        } else {
            rng.random_range(0..=(cpuset.len() as i64 * 3))
        };
        let mut mempages = Vec::new();
        if !chance(rng, 0.15) {
            let huge_2m: i64 = if chance(rng, 0.6) {
                rng.random_range(0..=(memory / 2) / 2)
            } else {
                0
            };
            let huge_1g: i64 = if chance(rng, 0.3) {
                rng.random_range(0..=2)
            } else {
                0
            };
            let small_kb = (memory * 1024 - huge_2m * 2048 - huge_1g * 1048576).max(0);
            let mut sizes = vec![(4i64, small_kb / 4)];
            if huge_2m > 0 || chance(rng, 0.3) {
                sizes.push((2048, huge_2m));
            }
            if huge_1g > 0 {
                sizes.push((1048576, huge_1g));
            }
            if chance(rng, 0.1) {
                sizes.push((16, rng.random_range(0..100000)));
            }
            if chance(rng, 0.2) {
                sizes.reverse();
            }
            for (size, total) in sizes {
                let used = if total > 0 && chance(rng, 0.5) {
                    rng.random_range(0..=total)
                } else {
                    0
                };
                let mut d = Map::new();
                d.insert("size_kb".into(), json!(size));
                d.insert("total".into(), json!(total));
                d.insert("used".into(), json!(used));
                if !chance(rng, 0.1) {
                    let reserved = if chance(rng, 0.8) {
                        0
                    } else {
                        rng.random_range(0..=(total - used).max(0))
                    };
                    d.insert("reserved".into(), json!(reserved));
                }
                mempages.push(obj("NUMAPagesTopology", "1.1", Value::Object(d)));
            }
        }
        let mut d = Map::new();
        d.insert("id".into(), json!(cell_id));
        d.insert("cpuset".into(), json!(cpuset));
        if !chance(rng, 0.02) {
            d.insert("pcpuset".into(), json!(pcpuset));
        }
        d.insert("memory".into(), json!(memory));
        d.insert("cpu_usage".into(), json!(cpu_usage));
        d.insert("memory_usage".into(), json!(memory_usage));
        d.insert("pinned_cpus".into(), json!(pinned));
        d.insert("siblings".into(), json!(sib_out));
        d.insert("mempages".into(), Value::Array(mempages));
        if chance(rng, 0.3) {
            let physnets: Vec<&str> = ["foo", "bar", "baz"]
                .into_iter()
                .filter(|_| chance(rng, 0.4))
                .collect();
            d.insert(
                "network_metadata".into(),
                obj(
                    "NetworkMetadata",
                    "1.0",
                    json!({"physnets": physnets, "tunneled": chance(rng, 0.4)}),
                ),
            );
        }
        if !chance(rng, 0.03) {
            d.insert(
                "socket".into(),
                if chance(rng, 0.1) {
                    Value::Null
                } else {
                    json!(ci as i64 / 2)
                },
            );
        }
        cells.push(obj("NUMACell", "1.5", Value::Object(d)));
    }
    obj("NUMATopology", "1.2", json!({ "cells": cells }))
}

// ---------------------------------------------------------------------------------
// Flavor / image generator
// ---------------------------------------------------------------------------------

fn gen_flavor_image(rng: &mut StdRng) -> (i64, i64, BTreeMap<String, String>, Map<String, Value>) {
    let vcpus: i64 = pick(rng, &[1, 1, 2, 2, 3, 4, 4, 6, 8]);
    let memory: i64 = pick(
        rng,
        &[128, 256, 512, 768, 1024, 1536, 2048, 4096, 100, 1000],
    );
    let mut es = BTreeMap::new();
    let mut img = Map::new();
    let put = |rng: &mut StdRng,
               es: &mut BTreeMap<String, String>,
               img: &mut Map<String, Value>,
               key: &str,
               prop: &str,
               value: String| {
        if chance(rng, 0.75) {
            es.insert(key.to_string(), value);
        } else {
            img.insert(prop.to_string(), Value::String(value));
        }
    };
    let nodes = if chance(rng, 0.6) {
        let n: i64 = pick(rng, &[1, 1, 2, 2, 3, 4]);
        put(
            rng,
            &mut es,
            &mut img,
            "hw:numa_nodes",
            "hw_numa_nodes",
            n.to_string(),
        );
        Some(n)
    } else {
        None
    };
    let policy = if chance(rng, 0.6) {
        let p = pick(rng, &["dedicated", "dedicated", "shared", "mixed"]);
        put(
            rng,
            &mut es,
            &mut img,
            "hw:cpu_policy",
            "hw_cpu_policy",
            p.to_string(),
        );
        Some(p)
    } else {
        None
    };
    if chance(rng, 0.35) {
        let t = pick(rng, &["prefer", "isolate", "require"]);
        put(
            rng,
            &mut es,
            &mut img,
            "hw:cpu_thread_policy",
            "hw_cpu_thread_policy",
            t.to_string(),
        );
    }
    if chance(rng, 0.35) {
        let p = pick(
            rng,
            &["small", "large", "any", "4", "2048", "1048576", "2MB", "16"],
        );
        put(
            rng,
            &mut es,
            &mut img,
            "hw:mem_page_size",
            "hw_mem_page_size",
            p.to_string(),
        );
    }
    if chance(rng, 0.15) {
        let e = pick(rng, &["share", "isolate", "isolate"]);
        put(
            rng,
            &mut es,
            &mut img,
            "hw:emulator_threads_policy",
            "hw_emulator_threads_policy",
            e.to_string(),
        );
    }
    if policy == Some("mixed") && chance(rng, 0.8) {
        let mask = if chance(rng, 0.5) {
            "^0".to_string()
        } else {
            format!("0-{}", (vcpus - 1).max(0) / 2)
        };
        es.insert("hw:cpu_dedicated_mask".into(), mask);
    }
    if let Some(n) = nodes {
        // manual layout for some multi-node requests (sometimes inconsistent)
        if n > 1 && chance(rng, 0.3) {
            let mut cpus: Vec<i64> = (0..vcpus).collect();
            if chance(rng, 0.5) {
                cpus.shuffle(rng);
            }
            let per = (vcpus / n).max(1);
            let mut left_mem = memory;
            for i in 0..n {
                let chunk: Vec<String> = cpus
                    .iter()
                    .skip((i * per) as usize)
                    .take(if i == n - 1 { usize::MAX } else { per as usize })
                    .map(|c| c.to_string())
                    .collect();
                es.insert(format!("hw:numa_cpus.{i}"), chunk.join(","));
                let mem = if i == n - 1 { left_mem } else { memory / n };
                left_mem -= mem;
                es.insert(format!("hw:numa_mem.{i}"), mem.to_string());
            }
        }
    }
    if chance(rng, 0.05) {
        es.insert("hw:cpu_realtime".into(), "yes".into());
        es.insert("hw:cpu_realtime_mask".into(), "^0".into());
    }
    (vcpus, memory, es, img)
}

// ---------------------------------------------------------------------------------
// Case and comparison
// ---------------------------------------------------------------------------------

struct Case {
    host_topology: Value,
    cpu_ratio: f64,
    ram_ratio: f64,
    pools: Vec<(Option<i64>, i64)>,
    candidates: usize,
    vcpus: i64,
    memory: i64,
    extra_specs: BTreeMap<String, String>,
    image_props: Map<String, Value>,
    network_metadata: Option<(Vec<String>, bool)>,
    pack: bool,
    instances: usize,
    run_filter: bool,
    /// PCI requests of the spec (None: `pci_requests` null).
    pci_requests: Option<Vec<PciReq>>,
}

/// One InstancePCIRequest: `count` devices of vendor "v" (and product, if given).
#[derive(Clone)]
struct PciReq {
    count: i64,
    product_id: Option<String>,
    numa_policy: Option<&'static str>,
    request_id: String,
}

impl PciReq {
    fn json(&self) -> Value {
        json!({"count": self.count, "product_id": self.product_id,
               "numa_policy": self.numa_policy, "request_id": self.request_id})
    }
}

/// The spec's `pci_requests` primitive as the conductor sends it.
fn pci_requests_primitive(reqs: &[PciReq]) -> Value {
    let items: Vec<Value> = reqs
        .iter()
        .map(|r| {
            let mut spec = Map::new();
            spec.insert("vendor_id".into(), json!("v"));
            if let Some(p) = &r.product_id {
                spec.insert("product_id".into(), json!(p));
            }
            let mut d = Map::new();
            d.insert("count".into(), json!(r.count));
            d.insert("spec".into(), json!([spec]));
            d.insert("alias_name".into(), json!("a"));
            d.insert("request_id".into(), json!(r.request_id));
            if let Some(p) = r.numa_policy {
                d.insert("numa_policy".into(), json!(p));
            }
            obj("InstancePCIRequest", "1.4", Value::Object(d))
        })
        .collect();
    obj("InstancePCIRequests", "1.1", json!({ "requests": items }))
}

fn gen_case(rng: &mut StdRng) -> Case {
    let host_topology = gen_host_topology(rng);
    let ncells = host_topology["nova_object.data"]["cells"]
        .as_array()
        .map_or(0, Vec::len) as i64;
    let pools = if chance(rng, 0.3) {
        (0..rng.random_range(1..=3))
            .map(|_| {
                let node = if chance(rng, 0.15) {
                    None
                } else {
                    Some(rng.random_range(0..ncells.max(1) + 1))
                };
                (node, rng.random_range(1..=4))
            })
            .collect()
    } else {
        Vec::new()
    };
    let (vcpus, memory, extra_specs, image_props) = gen_flavor_image(rng);
    Case {
        host_topology,
        cpu_ratio: pick(rng, &[1.0, 2.0, 4.0, 16.0, 0.5, 1.5]),
        ram_ratio: pick(rng, &[1.0, 1.0, 1.5, 0.5, 2.0]),
        pools,
        candidates: pick(rng, &[1, 1, 1, 2, 3, 0]),
        vcpus,
        memory,
        extra_specs,
        image_props,
        network_metadata: if chance(rng, 0.2) {
            let physnets = ["foo", "bar", "baz"]
                .into_iter()
                .filter(|_| chance(rng, 0.4))
                .map(str::to_string)
                .collect();
            Some((physnets, chance(rng, 0.4)))
        } else {
            None
        },
        pack: chance(rng, 0.3),
        instances: pick(rng, &[1, 1, 2, 3]),
        run_filter: chance(rng, 0.85),
        pci_requests: None,
    }
}

/// A case with both a NUMA topology (hw:numa_nodes forced when the flavor and image
/// ask for none) and PCI requests against device pools spread over the host cells.
fn gen_numa_pci_case(rng: &mut StdRng) -> Case {
    let mut c = gen_case(rng);
    let cell_ids: Vec<i64> = c.host_topology["nova_object.data"]["cells"]
        .as_array()
        .map(|cells| {
            cells
                .iter()
                .filter_map(|c| c["nova_object.data"]["id"].as_i64())
                .collect()
        })
        .unwrap_or_default();
    c.pools = (0..rng.random_range(1..=4))
        .map(|_| {
            let node = if chance(rng, 0.12) || cell_ids.is_empty() {
                None
            } else if chance(rng, 0.08) {
                Some(99)
            } else {
                Some(pick(rng, &cell_ids))
            };
            (node, pick(rng, &[1, 1, 2, 3, 4]))
        })
        .collect();
    let numa_asked = c.extra_specs.contains_key("hw:numa_nodes")
        || c.image_props.contains_key("hw_numa_nodes")
        || c.extra_specs.get("hw:cpu_policy").map(String::as_str) == Some("dedicated")
        || c.image_props.get("hw_cpu_policy").and_then(Value::as_str) == Some("dedicated");
    if !numa_asked {
        // Two nodes only when vCPUs and memory split evenly (nova rejects the rest
        // before any fit), and no thread policy without dedicated CPUs (likewise).
        let even = c.vcpus % 2 == 0 && c.memory % 2 == 0;
        let n = if even {
            pick(rng, &["1", "1", "2"])
        } else {
            "1"
        };
        c.extra_specs.insert("hw:numa_nodes".into(), n.into());
        c.extra_specs.remove("hw:cpu_thread_policy");
        c.image_props.remove("hw_cpu_thread_policy");
    }
    // Candidates are what Placement returned: at least one (none fails every host
    // before the fit, which the NUMA-only test covers).
    c.candidates = pick(rng, &[1, 1, 1, 2]);
    let npools = c.pools.len();
    c.pci_requests = Some(
        (0..pick(rng, &[1usize, 1, 1, 2]))
            .map(|i| PciReq {
                count: pick(rng, &[1, 1, 1, 1, 2, 3]),
                product_id: if chance(rng, 0.4) {
                    Some(format!("p{}", rng.random_range(0..npools + 1)))
                } else {
                    None
                },
                numa_policy: pick(
                    rng,
                    &[
                        None,
                        Some("legacy"),
                        Some("required"),
                        Some("preferred"),
                        Some("socket"),
                    ],
                ),
                request_id: format!("req-{i}"),
            })
            .collect(),
    );
    c
}

fn case_json(c: &Case) -> Value {
    json!({
        "op": "case",
        "host": {
            "numa_topology": c.host_topology,
            "cpu_allocation_ratio": c.cpu_ratio,
            "ram_allocation_ratio": c.ram_ratio,
            "pci_pools": c.pools.iter().map(|(n, k)| json!([n, k])).collect::<Vec<_>>(),
            "candidates": c.candidates,
        },
        "flavor": {"vcpus": c.vcpus, "memory_mb": c.memory, "extra_specs": c.extra_specs},
        "image_props": c.image_props,
        "network_metadata": c.network_metadata.as_ref().map(|(p, t)| json!({"physnets": p, "tunneled": t})),
        "pack": c.pack,
        "instances": c.instances,
        "run_filter": c.run_filter,
        "pci_requests": c.pci_requests.as_ref().map(|r| r.iter().map(PciReq::json).collect::<Vec<_>>()),
    })
}

/// The host's pools as `[product_id, numa_node, count]`, as the oracle reports them.
fn pools_summary(host: &HostState) -> Value {
    Value::Array(
        host_fit::host_pools(host)
            .pools
            .iter()
            .map(|p| {
                let product = p.get("product_id").and_then(|v| v.as_str());
                let node = match p.get("numa_node") {
                    Some(pci::PciValue::Int(n)) => json!(n),
                    _ => Value::Null,
                };
                json!([product, node, p.count])
            })
            .collect(),
    )
}

/// A fitted InstanceNUMATopology reduced to what must agree: per cell the host cell
/// id, the CPU sets (sorted), page size, policies, the pinning in dict order and the
/// reserved CPUs in set order.
fn normalize_fitted(v: &Value) -> Value {
    if v.is_null() {
        return Value::Null;
    }
    let data = &v["nova_object.data"];
    let sorted = |x: &Value| {
        let mut l: Vec<i64> = x
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default();
        l.sort_unstable();
        json!(l)
    };
    let cells: Vec<Value> = data["cells"]
        .as_array()
        .map(|cells| {
            cells
                .iter()
                .map(|c| {
                    let d = &c["nova_object.data"];
                    let pinning: Vec<Value> = d["cpu_pinning_raw"]
                        .as_object()
                        .map(|m| m.iter().map(|(k, v)| json!([k, v])).collect())
                        .unwrap_or_default();
                    json!({
                        "id": d["id"],
                        "cpuset": sorted(&d["cpuset"]),
                        "pcpuset": sorted(&d["pcpuset"]),
                        "memory": d["memory"],
                        "pagesize": d["pagesize"],
                        "cpu_policy": d["cpu_policy"],
                        "cpu_thread_policy": d["cpu_thread_policy"],
                        "pinning": if d["cpu_pinning_raw"].is_null() { Value::Null } else { json!(pinning) },
                        "reserved": d["cpuset_reserved"],
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    json!({"cells": cells, "emulator_threads_policy": data["emulator_threads_policy"]})
}

fn host_summary(t: &NumaTopology) -> Value {
    Value::Array(
        t.cells
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "cpu_usage": c.cpu_usage,
                    "memory_usage": c.memory_usage,
                    "pinned": c.pinned_cpus.to_vec(),
                    "pages": c.mempages.iter().map(|p| json!([p.size_kb, p.total, p.used, p.reserved.unwrap_or(0)])).collect::<Vec<_>>(),
                })
            })
            .collect(),
    )
}

fn limits_summary(v: &Value) -> Value {
    if v.is_null() {
        return Value::Null;
    }
    let d = &v["nova_object.data"];
    let nm = &d["network_metadata"];
    let nm = if nm.is_null() {
        Value::Null
    } else {
        let mut p: Vec<String> = nm["nova_object.data"]["physnets"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        p.sort();
        json!({"physnets": p, "tunneled": nm["nova_object.data"]["tunneled"]})
    };
    json!({"cpu": d["cpu_allocation_ratio"].as_f64(), "ram": d["ram_allocation_ratio"].as_f64(), "nm": nm})
}

/// Our side of one case, shaped like the oracle's answer (steps only).
fn run_ours(c: &Case, constraints: &Value) -> Vec<Value> {
    let mut host = HostState {
        host: "host1".into(),
        nodename: "node1".into(),
        numa_topology: Some(std::sync::Arc::new(c.host_topology.clone())),
        cpu_allocation_ratio: c.cpu_ratio,
        ram_allocation_ratio: c.ram_ratio,
        pci_stats: Some(std::sync::Arc::new(Value::Array(
            c.pools
                .iter()
                .enumerate()
                .map(|(i, (n, k))| {
                    json!({"vendor_id": "v", "product_id": format!("p{i}"), "numa_node": n, "count": k})
                })
                .collect(),
        ))),
        allocation_candidates: (0..c.candidates).map(|_| json!({"mappings": {}}).into()).collect(),
        ..Default::default()
    };
    let mut spec = RequestSpec {
        flavor: Flavor {
            vcpus: c.vcpus,
            memory_mb: c.memory,
            root_gb: 1,
            extra_specs: c.extra_specs.clone(),
            ..Default::default()
        },
        image: Some(ImageMeta {
            properties: c.image_props.clone(),
            ..Default::default()
        }),
        numa_topology: if constraints.is_null() {
            None
        } else {
            Some(constraints.clone())
        },
        network_metadata: c.network_metadata.as_ref().map(|(p, t)| {
            NetworkMetadata {
                physnets: Some(p.iter().cloned().collect()),
                tunneled: Some(*t),
            }
            .to_primitive()
        }),
        num_instances: c.instances as i64,
        pci_requests: c.pci_requests.as_deref().map(pci_requests_primitive),
        ..Default::default()
    };
    let requests = host_fit::spec_requests(&spec).expect("our decode of the PCI requests");
    let filter = NUMATopologyFilter::new(c.pack);
    let mut steps = Vec::new();
    for _ in 0..c.instances {
        let mut step = Map::new();
        // direct fit on a copy, limits from the host ratios (+ network metadata)
        let host_topo = host.numa.get(host.numa_topology.as_deref());
        match (&host_topo, spec.numa_topology.as_ref()) {
            (Ok(ht), Some(raw)) => {
                let mut inst =
                    InstanceTopology::from_primitive(raw).expect("our decode of nova's topology");
                let limits = Limits {
                    cpu_allocation_ratio: c.cpu_ratio,
                    ram_allocation_ratio: c.ram_ratio,
                    network_metadata: spec
                        .network_metadata
                        .as_ref()
                        .map(|v| NetworkMetadata::from_primitive(v).expect("nm")),
                };
                let stats = host_fit::host_pools(&host);
                let pools = stats.numa_counts();
                let empty = NumaTopology::default();
                let ht = ht.as_deref().unwrap_or(&empty);
                let no_mapping = ProviderMapping::default();
                let numa_pci = requests
                    .as_deref()
                    .map(|r| pci::NumaPciCheck::new(&stats, r, Some(&no_mapping), ht));
                let check = |cells: &[InstanceCell]| -> Result<bool, NumaError> {
                    numa_pci.as_ref().map_or(Ok(true), |c| c.check(cells))
                };
                let pci = PciContext {
                    pools: Some(&pools),
                    support_requests: numa_pci.is_some().then_some(&check as PciSupportCheck<'_>),
                };
                match numa_fit_instance_to_host(ht, &mut inst, Some(&limits), c.pack, &pci) {
                    Ok(fitted) => {
                        step.insert(
                            "direct".into(),
                            normalize_fitted(&fitted.map_or(Value::Null, |f| f.to_primitive())),
                        );
                    }
                    Err(_) => {
                        step.insert("direct_error".into(), json!(true));
                    }
                }
            }
            (Err(_), _) => {
                step.insert("direct_error".into(), json!(true));
            }
            (Ok(_), None) => {
                step.insert("direct".into(), Value::Null);
            }
        }
        if c.run_filter {
            let req = FilterRequest {
                spec: &spec,
                now: Utc::now(),
                index: 0,
                is_rebuild: false,
            };
            let passes = filter.filter_host(&mut host, &req);
            step.insert("passes".into(), json!(passes));
            step.insert("candidates".into(), json!(host.allocation_candidates.len()));
            step.insert(
                "limits".into(),
                limits_summary(host.limits.get("numa_topology").unwrap_or(&Value::Null)),
            );
            if !passes {
                steps.push(Value::Object(step));
                break;
            }
        }
        // The scheduler's consume order: resources, NUMA, then PCI on the fitted cells.
        let mapping = host_fit::request_group_mapping(&spec);
        let consumed = host_fit::consume_numa(
            &mut host,
            &mut spec.numa_topology,
            requests.as_deref(),
            &mapping,
            c.pack,
        )
        .is_ok()
            && {
                let cells = spec
                    .numa_topology
                    .as_ref()
                    .map(|t| InstanceTopology::from_primitive(t).expect("fitted").cells);
                host_fit::consume_pci(&mut host, &spec, cells.as_deref())
            };
        step.insert("consumed".into(), json!(consumed));
        step.insert(
            "fitted".into(),
            normalize_fitted(spec.numa_topology.as_ref().unwrap_or(&Value::Null)),
        );
        step.insert(
            "host".into(),
            match host.numa.get(host.numa_topology.as_deref()) {
                Ok(Some(t)) => host_summary(&t),
                _ => Value::Null,
            },
        );
        if c.pci_requests.is_some() {
            step.insert("pci_pools".into(), pools_summary(&host));
        }
        steps.push(Value::Object(step));
    }
    steps
}

/// Nova's answer reduced to the same shape as ours.
fn normalize_nova_steps(answer: &Value) -> Vec<Value> {
    answer["steps"]
        .as_array()
        .map(|steps| {
            steps
                .iter()
                .map(|s| {
                    let mut out = Map::new();
                    if s.get("direct_error").is_some() {
                        out.insert("direct_error".into(), json!(true));
                    } else {
                        out.insert("direct".into(), normalize_fitted(&s["direct"]));
                    }
                    if s.get("filter_error").is_some() {
                        // nova's filter raised: ours fails the host instead.
                        out.insert("passes".into(), json!(false));
                        out.insert("filter_raised".into(), json!(true));
                        return Value::Object(out);
                    }
                    if let Some(p) = s.get("passes") {
                        out.insert("passes".into(), p.clone());
                        out.insert("candidates".into(), s["candidates"].clone());
                        out.insert("limits".into(), limits_summary(&s["limits"]));
                    }
                    if let Some(consumed) = s.get("consumed") {
                        out.insert("consumed".into(), consumed.clone());
                        out.insert("fitted".into(), normalize_fitted(&s["fitted"]));
                        out.insert("host".into(), s["host"].clone());
                    }
                    if let Some(pools) = s.get("pci_pools") {
                        out.insert("pci_pools".into(), pools.clone());
                    }
                    Value::Object(out)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Our steps compared with nova's: where nova's filter raised we only demand a fail
/// (the rest of our step is not comparable).
fn steps_agree(ours: &[Value], nova: &[Value]) -> bool {
    if ours.len() != nova.len() {
        return false;
    }
    ours.iter().zip(nova).all(|(o, n)| {
        if n.get("filter_raised").is_some() {
            return o["passes"] == json!(false) && o.get("direct_error") == n.get("direct_error");
        }
        o == n
    })
}

#[derive(Default, Debug)]
struct Tally {
    cases: usize,
    constraints_error: usize,
    no_topology: usize,
    passes: usize,
    fails: usize,
    raises: usize,
    pinned_fits: usize,
    multi_steps: usize,
    consume_errors: usize,
}

/// The long-lived nova oracle process.
struct Oracle {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    answers: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Oracle {
    fn start() -> Self {
        let venv = crate::venv::find();
        let mut child = Command::new(venv.join("bin/python"))
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/oracle/numa_oracle.py"
            ))
            .env("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
            .env("PYTHONHASHSEED", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start the nova oracle with {}: {e}", venv.display())
            });
        let stdin = child.stdin.take().expect("stdin");
        let answers = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Oracle {
            child,
            stdin,
            answers,
        }
    }

    fn ask(&mut self, line: &Value) -> Value {
        writeln!(self.stdin, "{line}").expect("write to oracle");
        self.stdin.flush().expect("flush");
        let text = self
            .answers
            .next()
            .expect("the oracle exited early")
            .expect("read from oracle");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("oracle answer {text}: {e}"))
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn seed() -> u64 {
    std::env::var("NSRS_DIFF_SEED")
        .map(|s| s.parse::<u64>().expect("NSRS_DIFF_SEED must be a u64"))
        .unwrap_or(DEFAULT_SEED)
}

/// Requests that have both a NUMA topology (from nova's constraints) and PCI
/// requests: nova's fit with `pci_requests`/`pci_stats` (PCI NUMA affinity
/// policies, cells with devices first), NUMATopologyFilter, and the consumption
/// (NUMA, then the devices taken on the fitted cells) against ours, step by step,
/// with the host's pools after each consumption.
#[test]
fn numa_and_pci_agree_with_nova() {
    let seed = seed() ^ 0x9c1;
    let wanted = env_usize("NSRS_DIFF_NUMA_PCI_CASES").unwrap_or(DEFAULT_CASES);
    let started = Instant::now();
    let mut oracle = Oracle::start();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tally = Tally::default();
    let mut combined = 0usize;
    let mut pci_consumed = 0usize;
    let mut mismatches = Vec::new();
    let mut i = 0usize;
    let mut rejected: BTreeMap<String, usize> = BTreeMap::new();
    while combined < wanted {
        i += 1;
        assert!(
            i < wanted * 4,
            "the generator makes too few NUMA+PCI cases: {tally:?}"
        );
        let case = gen_numa_pci_case(&mut rng);
        let request = case_json(&case);
        let answer = oracle.ask(&request);
        tally.cases += 1;
        if let Some(e) = answer.get("oracle_error") {
            panic!("oracle could not run case {i}: {e}\n{request}");
        }
        if let Some(kind) = answer.get("constraints_error") {
            tally.constraints_error += 1;
            *rejected.entry(kind.to_string()).or_default() += 1;
            continue;
        }
        let constraints = answer["constraints"].clone();
        if constraints.is_null() {
            tally.no_topology += 1;
            continue;
        }
        combined += 1;
        let nova = normalize_nova_steps(&answer);
        let ours = run_ours(&case, &constraints);
        for s in &nova {
            match s.get("passes") {
                Some(Value::Bool(true)) => tally.passes += 1,
                Some(Value::Bool(false)) => tally.fails += 1,
                _ => {}
            }
            if s.get("filter_raised").is_some() || s.get("direct_error").is_some() {
                tally.raises += 1;
            }
            if s["consumed"] == json!(false) {
                tally.consume_errors += 1;
            }
            if s["consumed"] == json!(true) {
                pci_consumed += 1;
            }
        }
        if nova.len() > 1 {
            tally.multi_steps += 1;
        }
        if !steps_agree(&ours, &nova) && std::env::var_os("NSRS_DIFF_DUMP").is_some() {
            let path = format!("/tmp/numa_pci_mismatch_{i}.json");
            std::fs::write(&path, request.to_string()).expect("dump");
        }
        if !steps_agree(&ours, &nova) && mismatches.len() < 3 {
            mismatches.push(format!(
                "case {i}:\n request: {request}\n constraints: {constraints}\n ours: {}\n nova: {}",
                Value::Array(ours),
                Value::Array(nova)
            ));
        }
    }
    println!(
        "differential_numa (NUMA+PCI): seed {seed}, {combined} combined cases, {pci_consumed} consumptions, {tally:?}, flavors nova rejected: {rejected:?}, {:.1}s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        mismatches.is_empty(),
        "NUMA+PCI placement differs from nova:\n{}",
        mismatches.join("\n\n")
    );
    if combined >= 1000 {
        let n = combined as f64;
        assert!(
            tally.passes as f64 > 0.08 * n,
            "too few passing cases: {tally:?}"
        );
        assert!(
            tally.fails as f64 > 0.10 * n,
            "too few failing cases: {tally:?}"
        );
        assert!(
            pci_consumed as f64 > 0.05 * n,
            "too few consumptions: {tally:?}"
        );
    }
}

#[test]
fn numa_agrees_with_nova() {
    let seed = seed();
    let cases = env_usize("NSRS_DIFF_NUMA_CASES").unwrap_or(DEFAULT_CASES);
    let pyset_cases = env_usize("NSRS_DIFF_PYSET_CASES").unwrap_or(DEFAULT_PYSET_CASES);
    let started = Instant::now();
    let mut oracle_proc = Oracle::start();
    let mut ask = |line: &Value| oracle_proc.ask(line);

    // 1. The CPython set emulation.
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5e7);
    let mut set_mismatch = Vec::new();
    for _ in 0..pyset_cases {
        let gen = |rng: &mut StdRng| -> Vec<i64> {
            let n = rng.random_range(0..24);
            let max = pick(rng, &[8i64, 16, 40, 70, 130, 300]);
            (0..n).map(|_| rng.random_range(0..max)).collect()
        };
        let a = gen(&mut rng);
        let b = gen(&mut rng);
        let nova = ask(&json!({"op": "pyset", "a": a, "b": b}));
        let sa: PySet = a.iter().copied().collect();
        let sb: PySet = b.iter().copied().collect();
        let mut merged = sa.copy();
        merged.merge(&sb);
        let mut upd = PySet::new();
        upd.merge(&sa);
        let ours = json!({
            "set": sa.to_vec(),
            "coerced": sa.coerced().to_vec(),
            "minus": sa.difference(&sb).to_vec(),
            "and": sa.intersection(&sb).to_vec(),
            "merged": merged.to_vec(),
            "update_empty": upd.to_vec(),
        });
        if ours != nova && set_mismatch.len() < 5 {
            set_mismatch.push(format!("a={a:?} b={b:?}\n ours={ours}\n nova={nova}"));
        }
    }
    assert!(
        set_mismatch.is_empty(),
        "PySet differs from CPython:\n{}",
        set_mismatch.join("\n")
    );

    // 2. Fit, filter and consumption.
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tally = Tally::default();
    let mut mismatches = Vec::new();
    for i in 0..cases {
        let case = gen_case(&mut rng);
        let request = case_json(&case);
        let answer = ask(&request);
        tally.cases += 1;
        if let Some(e) = answer.get("oracle_error") {
            panic!("oracle could not run case {i}: {e}\n{request}");
        }
        if answer.get("constraints_error").is_some() {
            tally.constraints_error += 1;
            continue;
        }
        let constraints = answer["constraints"].clone();
        if constraints.is_null() {
            tally.no_topology += 1;
        }
        let nova = normalize_nova_steps(&answer);
        let ours = run_ours(&case, &constraints);
        for s in &nova {
            match s.get("passes") {
                Some(Value::Bool(true)) => tally.passes += 1,
                Some(Value::Bool(false)) => tally.fails += 1,
                _ => {}
            }
            if s.get("filter_raised").is_some() || s.get("direct_error").is_some() {
                tally.raises += 1;
            }
            if s["consumed"] == json!(false) {
                tally.consume_errors += 1;
            }
            if s["fitted"]["cells"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| !c["pinning"].is_null()))
            {
                tally.pinned_fits += 1;
            }
        }
        if nova.len() > 1 {
            tally.multi_steps += 1;
        }
        if !steps_agree(&ours, &nova) && std::env::var_os("NSRS_DIFF_DUMP").is_some() {
            let path = format!("/tmp/numa_mismatch_{i}.json");
            std::fs::write(&path, request.to_string()).expect("dump");
        }
        if !steps_agree(&ours, &nova) && mismatches.len() < 3 {
            mismatches.push(format!(
                "case {i}:\n request: {request}\n constraints: {constraints}\n ours: {}\n nova: {}",
                Value::Array(ours),
                Value::Array(nova)
            ));
        }
    }
    println!(
        "differential_numa: seed {seed}, {} pyset cases, {tally:?}, {:.1}s",
        pyset_cases,
        started.elapsed().as_secs_f64()
    );
    assert!(
        mismatches.is_empty(),
        "NUMA placement differs from nova:\n{}",
        mismatches.join("\n\n")
    );
    // The generator must keep producing the interesting outcomes.
    if cases >= 1000 {
        let n = tally.cases as f64;
        assert!(
            tally.passes as f64 > 0.15 * n,
            "too few passing cases: {tally:?}"
        );
        assert!(
            tally.fails as f64 > 0.10 * n,
            "too few failing cases: {tally:?}"
        );
        assert!(
            tally.pinned_fits as f64 > 0.05 * n,
            "too few pinned fits: {tally:?}"
        );
        assert!(
            tally.multi_steps as f64 > 0.05 * n,
            "too few multi-instance cases: {tally:?}"
        );
        assert!(tally.raises > 0, "no case where nova raises: {tally:?}");
    }
}
