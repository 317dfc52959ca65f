// SPDX-License-Identifier: Apache-2.0
//! The fanout casts nova's services send the scheduler: nova-api's aggregate
//! changes (`update_aggregates`, `delete_aggregate`, RPC 4.1) and nova-compute's
//! instance info (`update_instance_info`, `delete_instance_info`,
//! `sync_instance_info`, RPC 4.2).

use super::args::{instance_list, string_list};
use crate::model::Aggregate;
use crate::rpc::RemoteError;
use crate::state::{HostStateCache, HostStateStore};
use serde_json::{Map, Value};
use std::sync::Arc;
use tracing::{debug, info};

/// The casts of nova's manager this daemon serves.
pub(super) fn serves(method: &str) -> bool {
    matches!(
        method,
        "update_aggregates"
            | "delete_aggregate"
            | "update_instance_info"
            | "delete_instance_info"
            | "sync_instance_info"
    )
}

/// One cast: the aggregates go to `store`, the instance info to `cache` (without
/// it, instances are read per request and the casts need no state).
pub(super) fn cast(
    store: &HostStateStore,
    cache: Option<&Arc<HostStateCache>>,
    method: &str,
    args: &Map<String, Value>,
) -> Result<Value, RemoteError> {
    match method {
        "update_aggregates" => {
            let aggregates = args
                .get("aggregates")
                .map(Aggregate::list_from_primitive)
                .transpose()
                .map_err(|e| RemoteError::value_error(format!("invalid aggregates: {e}")))?
                .unwrap_or_default();
            info!(aggregates = ?aggregates.iter().map(|a| a.id).collect::<Vec<_>>(), "aggregates updated");
            store.update_aggregates(aggregates);
        }
        "delete_aggregate" => {
            let aggregate = args
                .get("aggregate")
                .map(Aggregate::from_primitive)
                .transpose()
                .map_err(|e| RemoteError::value_error(format!("invalid aggregate: {e}")))?
                .ok_or_else(|| {
                    RemoteError::type_error(
                        "delete_aggregate() missing required argument: 'aggregate'",
                    )
                })?;
            info!(aggregate = aggregate.id, "aggregate deleted");
            store.delete_aggregate(aggregate.id);
        }
        "update_instance_info" | "delete_instance_info" | "sync_instance_info" => {
            let host = args
                .get("host_name")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    RemoteError::type_error(format!(
                        "{method}() missing required argument: 'host_name'"
                    ))
                })?;
            // Without the cache, instances are read from the cell database for each
            // request (nova's path when a host's info is not marked updated).
            let Some(cache) = cache else {
                debug!(
                    method,
                    host, "instance info cast received; instances are read per request"
                );
                return Ok(Value::Null);
            };
            match method {
                "update_instance_info" => {
                    let instances = instance_list(args.get("instance_info"))?;
                    debug!(host, count = instances.len(), "instance info updated");
                    cache.update_instance_info(host, &instances);
                }
                "delete_instance_info" => {
                    let uuid = args
                        .get("instance_uuid")
                        .and_then(Value::as_str)
                        .ok_or_else(|| {
                            RemoteError::type_error(
                                "delete_instance_info() missing required argument: 'instance_uuid'",
                            )
                        })?;
                    debug!(host, instance = uuid, "instance info deleted");
                    cache.delete_instance_info(host, uuid);
                }
                _ => {
                    let uuids = string_list(args.get("instance_uuids"), "instance_uuids")?;
                    if cache.sync_instance_info(host, &uuids) {
                        debug!(host, "Successfully synced instances from host");
                    }
                }
            }
            // A claim or a deletion: the compute wrote its node just before the
            // cast; read it now, not at the next pass (a periodic sync follows no
            // write).
            if method != "sync_instance_info" {
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    let cache = Arc::clone(cache);
                    let host = host.to_string();
                    runtime.spawn(async move { cache.reread_host(&host).await });
                }
            }
        }
        _ => debug!(method, "cast ignored"),
    }
    Ok(Value::Null)
}
