// SPDX-License-Identifier: Apache-2.0
//! An AMQP delivery as the RPC server takes it: properties + body through
//! `decode_delivery` / `decode_request` (zlib, the 2.0 envelope, oslo's reserved
//! keys), then what the server does with the outcome without I/O: the failure reply
//! of an undecodable message, dispatch (oslo's namespace/version rules, nova's
//! `baseapi` and oslo's ping), the arguments of the manager's methods, the reply.
//!
//! Input: one selector byte, then the body.
//! - bits 0-1: content type: `application/json` (0, 1), none (2), `text/plain` (3)
//! - bits 2-4: compression header: none, `""`, `application/x-gzip` over the body as
//!   is, `application/x-gzip` over the body zlib-compressed here (the JSON path behind
//!   inflation), `zlib`, `gzip`, `application/x-bz2`, `application/x-zlib`
//! - bit 5: a 1 KiB bound instead of the daemon's default (the oversized path)
//! - bit 6: the compression header as an AMQP short string instead of a long string
//! - bit 7: through `decode_request` instead of `decode_delivery`
#![no_main]
// `Result<_, RemoteError>` is the endpoints' contract, as in the daemon.
#![allow(clippy::result_large_err)]

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::BasicProperties;
use libfuzzer_sys::fuzz_target;
use nova_scheduler::config::guards::GuardsSection;
use nova_scheduler::manager::fuzzing;
use nova_scheduler::model::{Aggregate, RequestSpec};
use nova_scheduler::rpc::envelope::{
    self, compress_zlib, decode_delivery, decode_request, encode_reply, reply_message,
    COMPRESSION_HEADER, CONTENT_TYPE_JSON, DEFAULT_MAX_MESSAGE_BYTES,
};
use nova_scheduler::rpc::{
    Dispatcher, Endpoint, EndpointFuture, IncomingCall, RemoteError, RequestContext,
};
use serde_json::{Map, Value};

/// nova's scheduler endpoint as the dispatcher sees it (no namespace, 4.5); its
/// methods are decoded, not run (they need the databases and Placement).
struct Manager;

const MANAGER_METHODS: &[&str] = &[
    "select_destinations",
    "update_aggregates",
    "delete_aggregate",
    "update_instance_info",
    "delete_instance_info",
    "sync_instance_info",
];

impl Endpoint for Manager {
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn version(&self) -> (u32, u32) {
        (4, 5)
    }
    fn has_method(&self, method: &str) -> bool {
        MANAGER_METHODS.contains(&method)
    }
    fn call(&self, call: IncomingCall) -> EndpointFuture {
        Box::pin(std::future::ready(manager_args(&call.method, &call.args)))
    }
}

/// The decoding each manager method starts with.
fn manager_args(method: &str, args: &Map<String, Value>) -> Result<Value, RemoteError> {
    let invalid = |e: nova_scheduler::model::DecodeError| RemoteError::value_error(e.to_string());
    match method {
        "select_destinations" => {
            let max = GuardsSection::default().max_instances_per_request;
            fuzzing::select_destinations_args(args, max).map(|spec| summary(&spec))
        }
        "update_aggregates" => args
            .get("aggregates")
            .map(Aggregate::list_from_primitive)
            .transpose()
            .map_err(invalid)
            .map(|a| Value::from(a.map_or(0, |a| a.len()))),
        "delete_aggregate" => args
            .get("aggregate")
            .map(Aggregate::from_primitive)
            .transpose()
            .map_err(invalid)
            .map(|a| Value::from(a.map(|a| a.id))),
        "update_instance_info" => {
            fuzzing::instance_info_arg(args.get("instance_info")).map(Value::from)
        }
        "sync_instance_info" => {
            fuzzing::instance_uuids_arg(args.get("instance_uuids")).map(Value::from)
        }
        _ => Ok(Value::Null),
    }
}

fn summary(spec: &RequestSpec) -> Value {
    Value::from(spec.num_instances)
}

/// Runs a future that never waits (the builtin endpoints answer at once).
fn ready<T>(mut f: std::pin::Pin<Box<dyn Future<Output = T> + Send>>) -> T {
    let mut cx = Context::from_waker(Waker::noop());
    match f.as_mut().poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("an endpoint future that is not ready at once"),
    }
}

fn compression_for(selector: u8) -> Option<&'static str> {
    match (selector >> 2) & 7 {
        0 => None,
        1 => Some(""),
        2 | 3 => Some("application/x-gzip"),
        4 => Some("zlib"),
        5 => Some("gzip"),
        6 => Some("application/x-bz2"),
        _ => Some("application/x-zlib"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let content_type = match selector & 3 {
        0 | 1 => Some(CONTENT_TYPE_JSON),
        2 => None,
        _ => Some("text/plain"),
    };
    let compression = compression_for(selector);
    let compressed;
    let body = if (selector >> 2) & 7 == 3 {
        compressed = compress_zlib(body);
        &compressed[..]
    } else {
        body
    };
    let max_bytes = if selector & 0x20 != 0 {
        1024
    } else {
        DEFAULT_MAX_MESSAGE_BYTES
    };

    let decoded = if selector & 0x80 != 0 {
        decode_request(content_type, compression, body, max_bytes)
    } else {
        let mut headers = FieldTable::default();
        if let Some(c) = compression {
            let value = if selector & 0x40 != 0 {
                AMQPValue::ShortString(ShortString::from(c))
            } else {
                AMQPValue::LongString(c.into())
            };
            headers.insert(COMPRESSION_HEADER.into(), value);
        }
        let mut properties = BasicProperties::default().with_headers(headers);
        if let Some(ct) = content_type {
            properties = properties.with_content_type(ct.into());
        }
        decode_delivery(&properties, body, max_bytes)
    };

    let request = match decoded {
        Ok(request) => request,
        Err(e) => {
            // The server answers an addressable undecodable message with a ValueError.
            if let Some((msg_id, _reply_q)) = e.reply_target() {
                let failure =
                    RemoteError::value_error(format!("Malformed RPC message: {}", e.reason));
                let reply = reply_message(
                    msg_id,
                    Value::Null,
                    Some(failure.to_failure_string("<malformed message>")),
                    true,
                );
                let _ = encode_reply(&reply, false);
            }
            return;
        }
    };

    // What the server reads of a decoded request.
    let _ = request.is_call();
    let _ = request.heartbeat_interval();
    let ctx: &RequestContext = &request.context;
    let _ = (ctx.request_id(), ctx.global_request_id(), ctx.user_id());
    let _ = (
        ctx.project_id(),
        ctx.auth_token(),
        ctx.roles(),
        ctx.is_admin(),
    );
    let _ = (
        ctx.read_deleted(),
        ctx.to_message_keys(),
        format!("{ctx:?}"),
    );

    let dispatcher = Dispatcher::with_builtins(vec![Arc::new(Manager)], "scheduler", true);
    let method = request.method.clone();
    let outcome = match dispatcher.resolve(
        &request.method,
        request.namespace.as_deref(),
        &request.version,
    ) {
        Ok(endpoint) => ready(endpoint.call(IncomingCall {
            method: request.method,
            namespace: request.namespace,
            version: request.version,
            args: request.args,
            context: request.context,
            is_call: true,
            deadline: None,
            redelivered: false,
        })),
        Err(e) => Err(e),
    };
    let msg_id = request.msg_id.as_deref().unwrap_or("m");
    let reply = match outcome {
        Ok(result) => reply_message(msg_id, result, None, true),
        Err(e) => reply_message(
            msg_id,
            Value::Null,
            Some(e.to_failure_string(&method)),
            true,
        ),
    };
    let (reply_body, _) = encode_reply(&reply, selector & 1 != 0);
    if selector & 1 != 0 {
        // Our own zlib reply inflates back under the daemon's bound.
        envelope::decompress("application/x-gzip", &reply_body, DEFAULT_MAX_MESSAGE_BYTES)
            .unwrap_or_else(|_| panic!("a reply this daemon compressed does not inflate"));
    }
});
