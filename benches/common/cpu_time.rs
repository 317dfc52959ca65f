// SPDX-License-Identifier: Apache-2.0
//! A criterion measurement of the benchmark thread's own CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`), so results do not depend on what else the machine
//! runs. `NSRS_BENCH_WALL=1` selects criterion's wall clock.

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{Criterion, Throughput};

/// Nanoseconds this thread has spent on a CPU.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(
        rc, 0,
        "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed; set NSRS_BENCH_WALL=1"
    );
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub struct ThreadCpuTime;

impl Measurement for ThreadCpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns().saturating_sub(start)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuFormatter
    }
}

struct CpuFormatter;

impl ValueFormatter for CpuFormatter {
    fn scale_values(&self, ns: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = if ns < 1e3 {
            (1.0, "ns cpu")
        } else if ns < 1e6 {
            (1e-3, "µs cpu")
        } else if ns < 1e9 {
            (1e-6, "ms cpu")
        } else {
            (1e-9, "s cpu")
        };
        values.iter_mut().for_each(|v| *v *= factor);
        unit
    }

    fn scale_throughputs(
        &self,
        _typical: f64,
        throughput: &Throughput,
        values: &mut [f64],
    ) -> &'static str {
        let (per, unit) = match *throughput {
            Throughput::Bytes(b) | Throughput::BytesDecimal(b) => {
                (b as f64 / 1_048_576.0, "MiB/s cpu")
            }
            Throughput::Elements(e) => (e as f64, "elem/s cpu"),
            Throughput::Bits(b) => (b as f64, "bit/s cpu"),
        };
        values.iter_mut().for_each(|ns| *ns = per * 1e9 / *ns);
        unit
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

/// Runs `bench` under thread CPU time, or wall time with `NSRS_BENCH_WALL=1`.
#[allow(dead_code)]
pub fn run(bench_cpu: fn(&mut Criterion<ThreadCpuTime>), bench_wall: fn(&mut Criterion<WallTime>)) {
    if std::env::var_os("NSRS_BENCH_WALL").is_some_and(|v| v == "1") {
        let mut c = Criterion::default().configure_from_args();
        bench_wall(&mut c);
        c.final_summary();
    } else {
        let mut c = Criterion::default()
            .with_measurement(ThreadCpuTime)
            .configure_from_args();
        bench_cpu(&mut c);
        c.final_summary();
    }
}
