// SPDX-License-Identifier: Apache-2.0
//! The edges of one `select_destinations` that are pure CPU:
//! - `request_decode`: a captured nova 34 request (RabbitMQ firehose copy in
//!   `src/rpc/testdata/`) from body bytes to the oslo envelope, the message, and the
//!   `RequestSpec` (what the daemon does before any I/O);
//! - `selections_encode`: 10 instances × 3 Selections (chosen + 2 alternates, each
//!   with its allocation request) to the reply body bytes;
//! - `placement_candidates_parse`: a `GET /allocation_candidates` answer (1.36) for
//!   1,000 and 5,000 compute nodes, from text to what the manager keeps.
//!
//! Figures are the benchmark thread's CPU time (`NSRS_BENCH_WALL=1`: wall clock).
//!
//! Run: `cargo bench --bench codec`

#[path = "common/cpu_time.rs"]
mod cpu_time;

use criterion::measurement::{Measurement, WallTime};
use criterion::{BenchmarkId, Criterion, Throughput};
use nova_scheduler::model::{RequestSpec, SchedulerLimits, Selection};
use nova_scheduler::placement::AllocationCandidates;
use nova_scheduler::py::json as pyjson;
use nova_scheduler::rpc::envelope::{decode_request, encode_reply, reply_message};
use serde_json::{json, Value};
use std::hint::black_box;

const SINGLE_REQUEST: &str = include_str!("../src/rpc/testdata/single_instance.request.json");
const GROUP_REQUEST: &str = include_str!("../src/rpc/testdata/multi_instance_group.request.json");

/// The AMQP body exactly as captured.
fn body_of(sample: &str) -> Vec<u8> {
    let captured: Value = serde_json::from_str(sample).expect("sample");
    captured["body_raw"]
        .as_str()
        .expect("body_raw")
        .as_bytes()
        .to_vec()
}

fn decode(body: &[u8]) -> RequestSpec {
    let request = decode_request(
        Some("application/json"),
        None,
        body,
        nova_scheduler::rpc::envelope::DEFAULT_MAX_MESSAGE_BYTES,
    )
    .expect("decoded");
    RequestSpec::from_primitive(&request.args["spec_obj"]).expect("spec")
}

fn allocation_request(rp: &str) -> Value {
    json!({"allocations": {rp: {"resources": {"VCPU": 2, "MEMORY_MB": 4096, "DISK_GB": 20}}},
           "mappings": {"": [rp]}})
}

/// A Placement 1.36 answer shaped as the seeded test cloud's: one allocation request
/// and one summary (three resource classes, a dozen traits) per provider.
fn candidates_body(n: usize) -> String {
    let mut requests = Vec::with_capacity(n);
    let mut summaries = serde_json::Map::new();
    for i in 0..n {
        let rp = format!("00000000-0000-4000-8000-{i:012}");
        requests.push(allocation_request(&rp));
        summaries.insert(
            rp.clone(),
            json!({
                "resources": {
                    "VCPU": {"capacity": 256, "used": i % 200},
                    "MEMORY_MB": {"capacity": 131072, "used": (i * 512) % 100_000},
                    "DISK_GB": {"capacity": 2000, "used": (i * 20) % 1500}
                },
                "traits": ["COMPUTE_NODE", "COMPUTE_STATUS_ENABLED_FALSE_NOT", "HW_CPU_X86_AVX",
                           "HW_CPU_X86_AVX2", "HW_CPU_X86_SSE42", "HW_CPU_X86_AESNI",
                           "COMPUTE_NET_ATTACH_INTERFACE", "COMPUTE_VOLUME_EXTEND",
                           "COMPUTE_IMAGE_TYPE_QCOW2", "COMPUTE_IMAGE_TYPE_RAW",
                           "COMPUTE_DEVICE_TAGGING", "OWNER_NOVA"],
                "parent_provider_uuid": null,
                "root_provider_uuid": rp
            }),
        );
    }
    json!({"allocation_requests": requests, "provider_summaries": summaries}).to_string()
}

fn bench<M: Measurement>(c: &mut Criterion<M>) {
    let mut group = c.benchmark_group("codec");
    for (name, sample) in [
        ("request_decode/single_instance", SINGLE_REQUEST),
        ("request_decode/multi_instance_group", GROUP_REQUEST),
    ] {
        let body = body_of(sample);
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_function(name, |b| b.iter(|| decode(black_box(&body))));
    }

    // 10 instances, each with its chosen host and two alternates.
    let selections: Vec<Vec<Selection>> = (0..10)
        .map(|i| {
            (0..3)
                .map(|k| {
                    let rp = format!("00000000-0000-4000-8000-{:012}", i * 3 + k);
                    Selection {
                        compute_node_uuid: rp.clone(),
                        service_host: format!("cmp{:05}", i * 3 + k),
                        nodename: format!("cmp{:05}", i * 3 + k),
                        cell_uuid: "c92472f0-62c4-4ed4-a194-9aa1ef9e11d3".into(),
                        limits: SchedulerLimits::default(),
                        allocation_request: Some(pyjson::dumps(&allocation_request(&rp))),
                        allocation_request_version: Some("1.36".into()),
                        availability_zone: Some("az1".into()),
                    }
                })
                .collect()
        })
        .collect();
    group.throughput(Throughput::Elements(30));
    group.bench_function("selections_encode/10x3", |b| {
        b.iter(|| {
            let result = Value::Array(
                black_box(&selections)
                    .iter()
                    .map(|list| Value::Array(list.iter().map(Selection::to_primitive).collect()))
                    .collect(),
            );
            encode_reply(
                &reply_message("0123456789abcdef", result, None, true),
                false,
            )
        })
    });

    for n in [1_000usize, 5_000] {
        let body = candidates_body(n);
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(
            BenchmarkId::new("placement_candidates_parse", n),
            &body,
            |b, body| b.iter(|| AllocationCandidates::from_json(black_box(body)).expect("parsed")),
        );
        // Reference: the whole answer parsed into a JSON tree (what the daemon did
        // before the summaries' bodies were skipped).
        group.bench_with_input(BenchmarkId::new("json_tree_parse", n), &body, |b, body| {
            b.iter(|| serde_json::from_str::<Value>(black_box(body)).expect("parsed"))
        });
    }
    group.finish();
}

fn main() {
    cpu_time::run(bench::<cpu_time::ThreadCpuTime>, bench::<WallTime>);
}
