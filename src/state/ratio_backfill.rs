// SPDX-License-Identifier: Apache-2.0
//! The one write nova's scheduler makes while reading compute nodes: an allocation
//! ratio that is NULL or 0.0 is replaced by the configured value in memory *and in
//! the cell database* (`ComputeNode._from_db_object`'s `online_updates`, written by
//! `db.compute_node_update`, which also stamps `updated_at`). Doing the same keeps
//! an operator's database in the state nova would leave it in.
//!
//! nova also rewrites a pre-Liberty `numa_topology`; we read that format but do not
//! rewrite it (see `numa::host`).

use super::compute::RatioDefaults;
use super::rows::ComputeNodeRow;
use sqlx::mysql::MySqlPool;
use sqlx::AssertSqlSafe;
use std::collections::BTreeMap;

/// Which ratio columns of a row need the configured value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Missing {
    cpu: bool,
    ram: bool,
    disk: bool,
}

fn unset(value: Option<f64>) -> bool {
    value.is_none_or(|v| v == 0.0)
}

fn missing(node: &ComputeNodeRow) -> Option<Missing> {
    if !node.has_missing_ratio() {
        return None;
    }
    let m = Missing {
        cpu: unset(node.cpu_allocation_ratio),
        ram: unset(node.ram_allocation_ratio),
        disk: unset(node.disk_allocation_ratio),
    };
    Some(m)
}

/// The `(column, value)` assignments for one class of rows.
fn assignments(m: Missing, ratios: &RatioDefaults) -> Vec<(&'static str, f64)> {
    let mut set = Vec::new();
    if m.cpu {
        set.push(("cpu_allocation_ratio", ratios.cpu));
    }
    if m.ram {
        set.push(("ram_allocation_ratio", ratios.ram));
    }
    if m.disk {
        set.push(("disk_allocation_ratio", ratios.disk));
    }
    set
}

/// Writes the configured ratios into the rows of `nodes` that lack them, and returns
/// how many rows were updated. Rows are grouped by which columns they lack, one
/// `UPDATE` per group; each column is only written where it is still NULL/0.0, so a
/// compute service that set its ratio meanwhile wins. A failure is the caller's to
/// log: the in-memory substitution does not depend on it.
pub(super) async fn backfill(
    pool: &MySqlPool,
    nodes: &[ComputeNodeRow],
    ratios: &RatioDefaults,
) -> Result<u64, sqlx::Error> {
    let mut groups: BTreeMap<Missing, Vec<i64>> = BTreeMap::new();
    for node in nodes {
        if let Some(m) = missing(node) {
            groups.entry(m).or_default().push(node.id);
        }
    }
    let mut updated = 0;
    for (m, ids) in groups {
        let set = assignments(m, ratios);
        for chunk in ids.chunks(1000) {
            // Only placeholders and fixed column names are formatted into the SQL.
            let columns: Vec<String> = set
                .iter()
                .map(|(col, _)| format!("{col} = IF({col} IS NULL OR {col} = 0, ?, {col})"))
                .collect();
            let sql = format!(
                "UPDATE compute_nodes SET {}, updated_at = UTC_TIMESTAMP() \
                 WHERE deleted = 0 AND id IN ({})",
                columns.join(", "),
                vec!["?"; chunk.len()].join(",")
            );
            let mut query = sqlx::query(AssertSqlSafe(sql)).persistent(false);
            for (_, value) in &set {
                query = query.bind(*value);
            }
            for id in chunk {
                query = query.bind(*id);
            }
            updated += query.execute(pool).await?.rows_affected();
        }
    }
    if updated > 0 {
        tracing::info!(
            rows = updated,
            "wrote configured allocation ratios into compute nodes that had NULL/0.0 (as nova does)"
        );
    }
    Ok(updated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: i64, cpu: Option<f64>, ram: Option<f64>, disk: Option<f64>) -> ComputeNodeRow {
        ComputeNodeRow {
            id,
            cpu_allocation_ratio: cpu,
            ram_allocation_ratio: ram,
            disk_allocation_ratio: disk,
            ..ComputeNodeRow::default()
        }
    }

    #[test]
    fn only_null_or_zero_ratios_are_missing() {
        assert_eq!(missing(&node(1, Some(16.0), Some(1.5), Some(1.0))), None);
        assert_eq!(
            missing(&node(2, None, Some(0.0), Some(2.0))),
            Some(Missing {
                cpu: true,
                ram: true,
                disk: false
            })
        );
    }

    #[test]
    fn assignments_use_the_configured_values() {
        let ratios = RatioDefaults {
            cpu: 4.0,
            ram: 1.0,
            disk: 1.0,
        };
        let m = Missing {
            cpu: true,
            ram: false,
            disk: true,
        };
        assert_eq!(
            assignments(m, &ratios),
            vec![
                ("cpu_allocation_ratio", 4.0),
                ("disk_allocation_ratio", 1.0)
            ]
        );
    }
}
