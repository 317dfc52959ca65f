// SPDX-License-Identifier: Apache-2.0
//! What the manager does to a call's arguments before any I/O, reachable from the
//! fuzz targets in `fuzz/`. Not an API: nothing else should call it.

use super::args::{instance_list, string_list, SelectArgs};
use crate::model::RequestSpec;
use crate::rpc::RemoteError;
use serde_json::{Map, Value};

/// `select_destinations`' first step: its arguments decoded (`spec_obj`, or the
/// legacy dicts) and checked against `max_instances_per_request`.
pub fn select_destinations_args(
    args: &Map<String, Value>,
    max_instances_per_request: u32,
) -> Result<RequestSpec, RemoteError> {
    let decoded = SelectArgs::decode(args)?;
    decoded.check_size(max_instances_per_request)?;
    Ok(decoded.spec)
}

/// `update_instance_info`'s `instance_info` decoded: how many instances it names.
pub fn instance_info_arg(value: Option<&Value>) -> Result<usize, RemoteError> {
    instance_list(value).map(|instances| instances.len())
}

/// `sync_instance_info`'s `instance_uuids` decoded.
pub fn instance_uuids_arg(value: Option<&Value>) -> Result<Vec<String>, RemoteError> {
    string_list(value, "instance_uuids")
}
