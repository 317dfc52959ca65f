// SPDX-License-Identifier: Apache-2.0
//! `nova-scheduler-rs simulate`: the decision core on an embedded demo cloud, with
//! no RabbitMQ, database or Placement. Placement's role (candidates and claims) is
//! played by an in-memory inventory model with nova's capacity rule
//! (`(total − reserved) × allocation_ratio − used ≥ requested`), so the run shows
//! filters, weighers, consumption, claims and alternates end to end.

use crate::model::{Aggregate, Flavor, HostState, RequestSpec, ServiceInfo};
use crate::scheduler::{ClaimError, Claimer, ScheduleRequest, Scheduler};
use chrono::{Duration, Utc};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// Options of the `simulate` subcommand.
#[derive(Debug, Clone)]
pub struct SimulateOptions {
    pub hosts: usize,
    pub requests: usize,
    pub instances_per_request: usize,
    pub seed: u64,
}

impl Default for SimulateOptions {
    fn default() -> Self {
        SimulateOptions {
            hosts: 20,
            requests: 5,
            instances_per_request: 2,
            seed: 42,
        }
    }
}

impl SimulateOptions {
    /// The options of `nova-scheduler-rs simulate --hosts N --requests N --instances N
    /// --seed N`: the defaults where unset; at least one host and one instance.
    /// `--requests` must be a number here (a file only with `--snapshot`).
    pub fn from_cli(args: &crate::config::SimulateArgs) -> Result<Self, String> {
        let d = SimulateOptions::default();
        let requests = match &args.requests {
            None => d.requests,
            Some(n) => n.parse::<u64>().map_err(|_| {
                format!("--requests {n:?}: a number of requests (a file only with --snapshot)")
            })? as usize,
        };
        Ok(SimulateOptions {
            hosts: args.hosts.map_or(d.hosts, |n| n.max(1) as usize),
            requests,
            instances_per_request: args
                .instances
                .map_or(d.instances_per_request, |n| n.max(1) as usize),
            seed: args.seed.unwrap_or(d.seed),
        })
    }
}

/// Free capacity per provider and resource class, as Placement would compute it.
#[derive(Default)]
struct InventoryModel {
    free: BTreeMap<String, BTreeMap<String, i64>>,
    claims: BTreeMap<String, (String, BTreeMap<String, i64>)>,
}

impl InventoryModel {
    fn candidates(&self, want: &BTreeMap<String, i64>) -> Vec<(String, Value)> {
        self.free
            .iter()
            .filter(|(_, free)| {
                want.iter()
                    .all(|(rc, n)| free.get(rc).copied().unwrap_or(0) >= *n)
            })
            .map(|(rp, _)| {
                (
                    rp.clone(),
                    json!({"allocations": {rp: {"resources": want}}, "mappings": {"": [rp]}}),
                )
            })
            .collect()
    }
}

impl Claimer for InventoryModel {
    async fn claim(
        &mut self,
        uuid: &str,
        host: &HostState,
        ar: &Value,
    ) -> Result<bool, ClaimError> {
        let rp = host.uuid.as_deref().unwrap_or_default().to_string();
        let want: BTreeMap<String, i64> =
            serde_json::from_value(ar["allocations"][&rp]["resources"].clone()).unwrap_or_default();
        let Some(free) = self.free.get_mut(&rp) else {
            return Ok(false);
        };
        if want
            .iter()
            .any(|(rc, n)| free.get(rc).copied().unwrap_or(0) < *n)
        {
            return Ok(false);
        }
        for (rc, n) in &want {
            *free.entry(rc.clone()).or_default() -= n;
        }
        self.claims.insert(uuid.to_string(), (rp, want));
        Ok(true)
    }

    async fn release(&mut self, uuids: &[String]) -> Result<(), ClaimError> {
        for u in uuids {
            if let Some((rp, want)) = self.claims.remove(u) {
                for (rc, n) in want {
                    *self
                        .free
                        .entry(rp.clone())
                        .or_default()
                        .entry(rc)
                        .or_default() += n;
                }
            }
        }
        Ok(())
    }
}

/// Builds the demo cloud: hosts of varied sizes and usage in two cells and two AZs,
/// a few disabled or down.
fn demo_cloud(opts: &SimulateOptions, rng: &mut StdRng) -> (Vec<HostState>, InventoryModel) {
    let now = Utc::now();
    let cells = [
        "11111111-1111-4111-8111-111111111111",
        "22222222-2222-4222-8222-222222222222",
    ];
    let azs: Vec<Arc<Aggregate>> = (1..=2)
        .map(|i| {
            Arc::new(Aggregate {
                id: i,
                uuid: format!("aaaaaaaa-0000-4000-8000-00000000000{i}"),
                name: format!("az{i}"),
                metadata: [("availability_zone".to_string(), format!("az{i}"))].into(),
                ..Default::default()
            })
        })
        .collect();
    let mut model = InventoryModel::default();
    let mut hosts = Vec::new();
    for i in 0..opts.hosts {
        let name = format!("cmp{:05}", i + 1);
        let uuid = format!("00000000-0000-4000-8000-{:012}", i + 1);
        let vcpus = [8, 16, 32, 64][rng.random_range(0..4)];
        let ram = [16384, 65536, 131072, 262144][rng.random_range(0..4)];
        let disk = [200, 500, 1000, 2000][rng.random_range(0..4)];
        let used = rng.random_range(0..=vcpus / 2);
        let ram_used = ram * rng.random_range(0..50) / 100;
        let disk_used = disk * rng.random_range(0..50) / 100;
        let down = i % 17 == 16;
        let service = ServiceInfo {
            host: name.as_str().into(),
            disabled: i % 13 == 12,
            last_seen_up: Some(if down {
                now - Duration::minutes(10)
            } else {
                now
            }),
            version: 73,
            ..Default::default()
        };
        model.free.insert(
            uuid.clone(),
            [
                ("VCPU".to_string(), vcpus * 4 - used),
                ("MEMORY_MB".to_string(), ram - ram_used),
                ("DISK_GB".to_string(), disk - disk_used),
            ]
            .into(),
        );
        hosts.push(HostState {
            host: name.as_str().into(),
            nodename: name.into(),
            cell_uuid: cells[i % 2].into(),
            uuid: Some(uuid.into()),
            total_usable_ram_mb: ram,
            free_ram_mb: ram - ram_used,
            total_usable_disk_gb: disk,
            disk_mb_used: disk_used * 1024,
            free_disk_mb: (disk - disk_used) * 1024,
            vcpus_total: vcpus,
            vcpus_used: used,
            cpu_allocation_ratio: 4.0,
            ram_allocation_ratio: 1.0,
            disk_allocation_ratio: 1.0,
            hypervisor_type: Some("QEMU".into()),
            hypervisor_version: Some(8_002_000),
            aggregates: vec![Arc::clone(&azs[i % 2])],
            service,
            ..Default::default()
        });
    }
    (hosts, model)
}

/// Runs the simulation with `scheduler` (nova.conf's filters, weighers and
/// settings, see `app::build_scheduler`) and prints one line per instance. Returns
/// a process exit code.
pub async fn run(opts: SimulateOptions, scheduler: Scheduler) -> i32 {
    let mut rng = StdRng::seed_from_u64(opts.seed);
    let (hosts, mut model) = demo_cloud(&opts, &mut rng);
    println!(
        "demo cloud: {} hosts in 2 cells (every 13th disabled, every 17th down); filters {:?}; weighers {:?}",
        hosts.len(),
        scheduler.filters.names(),
        scheduler.weighers.names()
    );
    let flavors = [(2, 4096, 20), (4, 8192, 40), (8, 32768, 80)];
    let mut placed = 0;
    for r in 0..opts.requests {
        let (vcpus, memory_mb, root_gb) = flavors[r % flavors.len()];
        let want: BTreeMap<String, i64> = [
            ("VCPU".to_string(), vcpus),
            ("MEMORY_MB".to_string(), memory_mb),
            ("DISK_GB".to_string(), root_gb),
        ]
        .into();
        let candidates: BTreeMap<String, Value> = model.candidates(&want).into_iter().collect();
        let mut request_hosts: Vec<HostState> = hosts
            .iter()
            .filter(|h| {
                h.uuid
                    .as_ref()
                    .is_some_and(|u| candidates.contains_key(&**u))
            })
            .cloned()
            .collect();
        for h in &mut request_hosts {
            h.allocation_candidates = vec![candidates[h.uuid.as_deref().unwrap_or_default()]
                .clone()
                .into()];
        }
        let uuids: Vec<String> = (0..opts.instances_per_request)
            .map(|i| format!("inst-{r:03}-{i}"))
            .collect();
        let spec = RequestSpec {
            flavor: Flavor {
                vcpus,
                memory_mb,
                root_gb,
                ..Default::default()
            },
            num_instances: uuids.len() as i64,
            ..Default::default()
        };
        let started = Instant::now();
        let request = ScheduleRequest {
            spec,
            instance_uuids: Some(uuids.clone()),
            use_placement: true,
            return_alternates: true,
            now: Utc::now(),
        };
        match scheduler
            .schedule(request_hosts, request, &mut model, &mut rng)
            .await
        {
            Ok(out) => {
                for (uuid, dests) in uuids.iter().zip(&out.destinations) {
                    let names: Vec<&str> = dests.iter().map(|d| &*out.hosts[d.host].host).collect();
                    println!("request {r}: {uuid} ({vcpus} vCPU, {memory_mb} MB, {root_gb} GB) -> {} (alternates: {})", names[0], names[1..].join(", "));
                    placed += 1;
                }
                println!(
                    "request {r}: decided in {} µs",
                    started.elapsed().as_micros()
                );
            }
            Err(e) => println!("request {r}: {e}"),
        }
    }
    println!(
        "{placed} instance(s) placed; claims held: {}",
        model.claims.len()
    );
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn demo_cloud_places_and_claims_consistently() {
        let opts = SimulateOptions {
            hosts: 30,
            requests: 0,
            instances_per_request: 1,
            seed: 1,
        };
        let mut rng = StdRng::seed_from_u64(1);
        let (hosts, mut model) = demo_cloud(&opts, &mut rng);
        let before: i64 = model.free.values().map(|f| f["MEMORY_MB"]).sum();
        let want: BTreeMap<String, i64> = [("MEMORY_MB".to_string(), 1024)].into();
        let c: BTreeMap<String, Value> = model.candidates(&want).into_iter().collect();
        assert_eq!(c.len(), hosts.len());
        let h = &hosts[0];
        assert!(model
            .claim("i1", h, &c[h.uuid.as_deref().unwrap_or_default()])
            .await
            .expect("claim"));
        let after: i64 = model.free.values().map(|f| f["MEMORY_MB"]).sum();
        assert_eq!(before - after, 1024);
        model.release(&["i1".to_string()]).await.expect("release");
        assert_eq!(
            model.free.values().map(|f| f["MEMORY_MB"]).sum::<i64>(),
            before
        );
    }
}
