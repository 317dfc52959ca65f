// SPDX-License-Identifier: Apache-2.0
//! Vectors from nova's `nova/tests/unit/virt/test_hardware.py`.

use super::*;
use crate::numa::host::PagesTopology;
use crate::numa::usage::numa_usage_from_instance;

fn set(v: &[i64]) -> PySet {
    v.iter().copied().collect()
}

fn host_cell(id: i64, cpus: &[i64], pcpus: &[i64], memory: i64) -> NumaCell {
    NumaCell {
        id,
        cpuset: set(cpus),
        pcpuset: Some(set(pcpus)),
        memory,
        cpu_usage: 0,
        memory_usage: 0,
        pinned_cpus: PySet::new(),
        siblings: pcpus.iter().map(|&c| set(&[c])).collect(),
        mempages: Vec::new(),
        network_metadata: None,
        socket: Some(Some(0)),
    }
}

fn inst_cell(
    id: i64,
    cpus: &[i64],
    pcpus: &[i64],
    memory: i64,
    policy: Option<CpuPolicy>,
) -> InstanceCell {
    InstanceCell {
        id,
        cpuset: cpus.iter().copied().collect(),
        pcpuset: Some(pcpus.iter().copied().collect()),
        memory,
        pagesize: None,
        cpu_policy: policy,
        cpu_thread_policy: None,
        cpu_pinning: None,
        cpuset_reserved: None,
        cpu_topology: None,
    }
}

fn topo(cells: Vec<InstanceCell>) -> InstanceTopology {
    InstanceTopology {
        cells,
        ..Default::default()
    }
}

fn limits(cpu: f64, ram: f64) -> Limits {
    Limits {
        cpu_allocation_ratio: cpu,
        ram_allocation_ratio: ram,
        network_metadata: None,
    }
}

#[test]
fn shared_cell_memory_rules() {
    let mut h = host_cell(0, &[1, 2], &[], 1024);
    h.memory_usage = 512;
    let mut c = inst_cell(0, &[0, 1], &[], 1024, None);
    assert!(numa_fit_instance_cell(&h, &mut c, None, 0).unwrap());
    let mut c = inst_cell(0, &[0, 1, 2], &[], 4096, None);
    assert!(!numa_fit_instance_cell(&h, &mut c, None, 0).unwrap());
    let mut h2 = host_cell(0, &[], &[1, 2], 1024);
    h2.memory_usage = 512;
    let mut c = inst_cell(0, &[], &[0], 1024, Some(CpuPolicy::Dedicated));
    assert!(
        !numa_fit_instance_cell(&h2, &mut c, None, 0).unwrap(),
        "avail 512 < 1024"
    );
}

#[test]
fn small_pages_all_used_allow_shared_overcommit_only() {
    let mut h = host_cell(0, &[1, 2], &[1, 2], 1024);
    h.mempages = vec![PagesTopology {
        size_kb: 4,
        total: 262144,
        used: 262144,
        reserved: Some(0),
    }];
    let mut c = inst_cell(0, &[0], &[], 1024, None);
    assert!(numa_fit_instance_cell(&h, &mut c, None, 0).unwrap());
    let mut c = inst_cell(0, &[], &[0], 1024, Some(CpuPolicy::Dedicated));
    assert!(!numa_fit_instance_cell(&h, &mut c, None, 0).unwrap());
}

#[test]
fn explicit_page_size_uses_free_pages() {
    let mut h = host_cell(0, &[1, 2], &[], 1024);
    h.mempages = vec![PagesTopology {
        size_kb: 4,
        total: 262144,
        used: 0,
        reserved: None,
    }];
    let mut c = inst_cell(0, &[0], &[], 1024, None);
    c.pagesize = Some(4);
    assert!(numa_fit_instance_cell(&h, &mut c, None, 0).unwrap());
    h.mempages[0].used = 1;
    let mut c = inst_cell(0, &[0], &[], 1024, None);
    c.pagesize = Some(4);
    assert!(!numa_fit_instance_cell(&h, &mut c, None, 0).unwrap());
}

#[test]
fn ratio_limits_allow_equality() {
    let mut h = host_cell(0, &[1, 2], &[], 1024);
    h.cpu_usage = 2;
    h.memory_usage = 1024;
    let l = limits(2.0, 2.0);
    let mut c = inst_cell(0, &[0, 1], &[], 1024, None);
    assert!(numa_fit_instance_cell(&h, &mut c, Some(&l), 0).unwrap());
    let mut c = inst_cell(0, &[0, 1], &[], 4096, None);
    assert!(!numa_fit_instance_cell(&h, &mut c, Some(&l), 0).unwrap());
    let mut c = inst_cell(0, &[0, 1, 2, 3, 4], &[], 1024, None);
    assert!(!numa_fit_instance_cell(&h, &mut c, Some(&l), 0).unwrap());
}

#[test]
fn pinning_examples() {
    // siblings [{0,1},{2,3}], 4 vCPUs -> k=2 -> identity.
    let mut h = host_cell(0, &[], &[0, 1, 2, 3], 4096);
    h.siblings = vec![set(&[0, 1]), set(&[2, 3])];
    let mut c = inst_cell(0, &[], &[0, 1, 2, 3], 512, Some(CpuPolicy::Dedicated));
    assert!(numa_fit_instance_cell(&h, &mut c, None, 0).unwrap());
    assert_eq!(c.cpu_pinning, Some(vec![(0, 0), (1, 1), (2, 2), (3, 3)]));
    // require on an all-singleton host fails.
    let h1 = host_cell(0, &[], &[0, 1, 2], 4096);
    let mut c = inst_cell(0, &[], &[0, 1], 512, Some(CpuPolicy::Dedicated));
    c.cpu_thread_policy = Some(ThreadPolicy::Require);
    assert!(!numa_fit_instance_cell(&h1, &mut c, None, 0).unwrap());
    // require, siblings {0,4},{1,5},{2,6},{3,7}: {0,1,2} pinned -> fail; {0,1} -> fits.
    let mut h = host_cell(0, &[], &[0, 1, 2, 3, 4, 5, 6, 7], 4096);
    h.siblings = vec![set(&[0, 4]), set(&[1, 5]), set(&[2, 6]), set(&[3, 7])];
    h.pinned_cpus = set(&[0, 1, 2]);
    let mut c = inst_cell(0, &[], &[0, 1, 2, 3], 512, Some(CpuPolicy::Dedicated));
    c.cpu_thread_policy = Some(ThreadPolicy::Require);
    assert!(!numa_fit_instance_cell(&h, &mut c.clone(), None, 0).unwrap());
    h.pinned_cpus = set(&[0, 1]);
    assert!(numa_fit_instance_cell(&h, &mut c, None, 0).unwrap());
    assert_eq!(c.cpu_pinning, Some(vec![(0, 2), (1, 6), (2, 3), (3, 7)]));
    // Python set order: {5, 17} iterates 17 first.
    let mut h = host_cell(0, &[], &[5, 17], 4096);
    h.siblings = vec![set(&[5, 17])];
    let mut c = inst_cell(0, &[], &[0], 512, Some(CpuPolicy::Dedicated));
    assert!(numa_fit_instance_cell(&h, &mut c, None, 0).unwrap());
    assert_eq!(c.cpu_pinning, Some(vec![(0, 17)]));
}

#[test]
fn dedicated_instance_moves_to_free_cell() {
    let host = NumaTopology {
        cells: vec![
            host_cell(0, &[], &[0, 1], 2048),
            host_cell(1, &[], &[2, 3], 2048),
        ],
    };
    let fit = |host: &NumaTopology| {
        let mut t = topo(vec![inst_cell(
            0,
            &[],
            &[0, 1],
            512,
            Some(CpuPolicy::Dedicated),
        )]);
        numa_fit_instance_to_host(host, &mut t, None, false, &PciContext::NONE).unwrap()
    };
    assert!(fit(&host).is_some());
    let mut h = host.clone();
    h.cells[0].pinned_cpus = set(&[0]);
    assert_eq!(fit(&h).unwrap().cells[0].id, 1);
    h.cells[1].pinned_cpus = set(&[2]);
    assert!(fit(&h).is_none());
}

#[test]
fn usage_then_second_instance_goes_elsewhere() {
    let mut h = NumaTopology {
        cells: vec![
            host_cell(1, &[0, 1], &[], 2048),
            host_cell(2, &[2, 3], &[], 2048),
        ],
    };
    for c in &mut h.cells {
        c.cpu_usage = 2;
        c.memory_usage = 2048;
        c.mempages = vec![PagesTopology {
            size_kb: 4,
            total: 524288,
            used: 0,
            reserved: Some(0),
        }];
    }
    let l = limits(2.0, 2.0);
    let mut i3 = topo(vec![inst_cell(0, &[0, 1], &[], 1024, None)]);
    let f =
        numa_fit_instance_to_host(&h, &mut i3.clone(), Some(&l), false, &PciContext::NONE).unwrap();
    assert_eq!(f.unwrap().cells[0].id, 1);
    let mut i1 = topo(vec![inst_cell(0, &[0, 1], &[], 2048, None)]);
    let fitted = numa_fit_instance_to_host(&h, &mut i1, Some(&l), false, &PciContext::NONE)
        .unwrap()
        .unwrap();
    let used = numa_usage_from_instance(&h, &fitted).unwrap();
    assert_eq!(used.cells[0].memory_usage, 4096);
    assert_eq!(used.cells[0].mempages[0].used, 524288);
    let f = numa_fit_instance_to_host(&used, &mut i3, Some(&l), false, &PciContext::NONE).unwrap();
    assert_eq!(f.unwrap().cells[0].id, 2);
    let mut i2 = topo(vec![inst_cell(0, &[0, 1, 2, 3], &[], 1024, None)]);
    assert!(
        numa_fit_instance_to_host(&h, &mut i2, Some(&l), false, &PciContext::NONE)
            .unwrap()
            .is_none()
    );
}

#[test]
fn pci_pools_order_cells() {
    let h = NumaTopology {
        cells: vec![
            host_cell(1, &[0, 1], &[], 2048),
            host_cell(2, &[2, 3], &[], 2048),
        ],
    };
    let pools = [(Some(1), 1)];
    let pci = PciContext {
        pools: Some(&pools),
        support_requests: None,
    };
    let mut t = topo(vec![inst_cell(0, &[0], &[], 512, None)]);
    let f = numa_fit_instance_to_host(&h, &mut t, None, false, &pci)
        .unwrap()
        .unwrap();
    assert_eq!(
        f.cells[0].id, 2,
        "cells with PCI devices go last without PCI requests"
    );
}

#[test]
fn network_affinity() {
    let mut h = NumaTopology {
        cells: vec![
            host_cell(0, &[0, 1], &[], 2048),
            host_cell(1, &[2, 3], &[], 2048),
        ],
    };
    h.cells[0].network_metadata = Some(NetworkMetadata {
        physnets: Some(["foo".to_string()].into()),
        tunneled: Some(false),
    });
    h.cells[1].network_metadata = Some(NetworkMetadata {
        physnets: Some(Default::default()),
        tunneled: Some(true),
    });
    let mut l = limits(16.0, 1.5);
    l.network_metadata = Some(NetworkMetadata {
        physnets: Some(["foo".to_string()].into()),
        tunneled: Some(true),
    });
    let mut one = topo(vec![inst_cell(0, &[0], &[], 512, None)]);
    assert!(
        numa_fit_instance_to_host(&h, &mut one, Some(&l), false, &PciContext::NONE)
            .unwrap()
            .is_none()
    );
    let mut two = topo(vec![
        inst_cell(0, &[0], &[], 512, None),
        inst_cell(1, &[1], &[], 512, None),
    ]);
    assert!(
        numa_fit_instance_to_host(&h, &mut two, Some(&l), false, &PciContext::NONE)
            .unwrap()
            .is_some()
    );
}

#[test]
fn hostile_sizes_are_bounded() {
    // Many instance cells against many host cells: the step budget ends the search.
    let cells: Vec<NumaCell> = (0..40).map(|i| host_cell(i, &[i], &[], 1)).collect();
    let host = NumaTopology { cells };
    let mut t = topo((0..20).map(|i| inst_cell(i, &[i], &[], 1, None)).collect());
    // every cell fits, so this returns at once
    assert!(
        numa_fit_instance_to_host(&host, &mut t, None, false, &PciContext::NONE)
            .unwrap()
            .is_some()
    );
    // Nothing fits anywhere: nova would walk 40P20 permutations (forever); the step
    // budget ends it.
    let mut t = topo((0..20).map(|i| inst_cell(i, &[i], &[], 2, None)).collect());
    let r = numa_fit_instance_to_host(&host, &mut t, None, false, &PciContext::NONE);
    assert_eq!(r, Err(NumaError::TooComplex));
}

#[test]
fn cache_keys_follow_rewritten_instance_ids() {
    // nova keys its fit cache by the instance cell's *current* id, which a fit
    // rewrites to the host cell id, so a cell too big for every host cell can
    // inherit another cell's cached fit. Checked against nova 34: 4 one-MiB host
    // cells, instance cells of 1, 1 and 2 MiB -> [1, 2, 0].
    let host = NumaTopology {
        cells: (0..4).map(|i| host_cell(i, &[i], &[], 1)).collect(),
    };
    let mut t = topo(vec![
        inst_cell(0, &[0], &[], 1, None),
        inst_cell(1, &[1], &[], 1, None),
        inst_cell(2, &[2], &[], 2, None),
    ]);
    let fitted = numa_fit_instance_to_host(&host, &mut t, None, false, &PciContext::NONE).unwrap();
    let ids: Vec<i64> = fitted
        .expect("nova finds a 'fit'")
        .cells
        .iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, vec![1, 2, 0]);
}
