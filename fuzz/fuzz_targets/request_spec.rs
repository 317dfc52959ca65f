// SPDX-License-Identifier: Apache-2.0
//! JSON through every decoder of the manager's arguments: a `RequestSpec` primitive
//! (`spec_obj`), the legacy `request_spec` / `filter_properties` dicts,
//! `select_destinations`' arguments as the manager decodes them, the casts'
//! arguments (instance info, aggregates); then, for a spec that decodes, what the
//! manager does with it before any I/O (request filters, Placement query,
//! notification payloads).
//!
//! Input: JSON text (anything else is dropped at once). The seeds are the wire
//! samples' `args` and `spec_obj`.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use nova_scheduler::config::guards::GuardsSection;
use nova_scheduler::manager::fuzzing;
use nova_scheduler::model::{Aggregate, RequestSpec};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };

    // A spec_obj.
    if let Ok(spec) = RequestSpec::from_primitive(&value) {
        common::exercise_spec(&spec, Some(&value));
    }

    match &value {
        Value::Object(map) => {
            // select_destinations' arguments, any RPC version.
            let max = GuardsSection::default().max_instances_per_request;
            if let Ok(spec) = fuzzing::select_destinations_args(map, max) {
                common::exercise_spec(&spec, map.get("spec_obj"));
            }
            // The legacy dicts on their own (4.0-4.2 sends them as two arguments).
            let _ = RequestSpec::from_legacy(&value, &Value::Null);
            if let Some(fp) = map.get("filter_properties") {
                let _ = RequestSpec::from_legacy(&value, fp);
            }
            // The casts.
            let _ = fuzzing::instance_info_arg(map.get("instance_info"));
            let _ = fuzzing::instance_info_arg(Some(&value));
            let _ = fuzzing::instance_uuids_arg(map.get("instance_uuids"));
            if let Some(aggregates) = map.get("aggregates") {
                let _ = Aggregate::list_from_primitive(aggregates);
            }
            let _ = Aggregate::from_primitive(&value);
            let _ = Aggregate::list_from_primitive(&value);
        }
        Value::Array(_) => {
            let _ = Aggregate::list_from_primitive(&value);
            let _ = fuzzing::instance_uuids_arg(Some(&value));
        }
        _ => {}
    }
});
