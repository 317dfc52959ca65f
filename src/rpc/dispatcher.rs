// SPDX-License-Identifier: Apache-2.0
//! oslo.messaging's `RPCDispatcher` rules (`oslo_messaging/rpc/dispatcher.py`) over ordered
//! endpoints.
//!
//! For each endpoint in order: skip it unless its namespace equals the request's and its
//! version is compatible (same major, requested minor ≤ endpoint minor). The first such
//! endpoint that has the method, and whose access policy allows it (`DefaultRPCAccessPolicy`:
//! no leading `_`), handles the call. Otherwise `NoSuchMethod` if some endpoint was
//! compatible, else `UnsupportedVersion`.

// `Result<_, RemoteError>` is this module's contract (the Endpoint trait returns it);
// the error is a few strings and JSON values, built only on failure paths.
#![allow(clippy::result_large_err)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::context::RequestContext;
use super::envelope::version_is_compatible;
use super::failure::RemoteError;

/// The future an endpoint returns for one call.
pub type EndpointFuture = Pin<Box<dyn Future<Output = Result<Value, RemoteError>> + Send>>;

/// One dispatched request.
#[derive(Clone, Debug)]
pub struct IncomingCall {
    /// Method name.
    pub method: String,
    /// Request namespace (`None` for nova's scheduler API).
    pub namespace: Option<String>,
    /// Requested version, `"major.minor"`.
    pub version: String,
    /// Keyword arguments.
    pub args: Map<String, Value>,
    /// The request context.
    pub context: RequestContext,
    /// A call (a reply is expected) rather than a cast.
    pub is_call: bool,
    /// When the caller stops waiting for the answer (a call's AMQP `expiration` from
    /// its arrival, else the configured call timeout); `None` for casts.
    pub deadline: Option<std::time::Instant>,
    /// The broker delivered it before to a consumer that did not acknowledge it: an
    /// earlier attempt may have left effects (claims) behind.
    pub redelivered: bool,
}

/// An RPC endpoint: what a Python `Target(namespace, version)` object with methods is.
pub trait Endpoint: Send + Sync + 'static {
    /// Target namespace; `None` matches requests without a namespace.
    fn namespace(&self) -> Option<&str>;
    /// Target version, e.g. `(4, 5)`.
    fn version(&self) -> (u32, u32);
    /// Whether the endpoint has this public method.
    fn has_method(&self, method: &str) -> bool;
    /// Run the method. The value is the call's `result`; an error becomes its `failure`.
    fn call(&self, call: IncomingCall) -> EndpointFuture;
    /// Answer, without handling it, a request that was in flight when the daemon
    /// died `crashes` times (a poison message). An endpoint may first undo what an
    /// earlier attempt may have left behind; the answer is a failure.
    fn abandon(&self, call: IncomingCall, crashes: u32) -> EndpointFuture {
        Box::pin(std::future::ready(Err(poisoned(&call.method, crashes))))
    }
}

/// The failure a poison message is answered with.
pub fn poisoned(method: &str, crashes: u32) -> RemoteError {
    RemoteError::runtime_error(format!(
        "nova-scheduler-rs stopped {crashes} time(s) while handling this {method} request; \
         it is not handled again"
    ))
}

/// Ordered endpoints plus oslo's lookup rules.
#[derive(Clone)]
pub struct Dispatcher {
    endpoints: Vec<Arc<dyn Endpoint>>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let eps: Vec<String> = self
            .endpoints
            .iter()
            .map(|e| {
                let (maj, min) = e.version();
                format!("{}@{maj}.{min}", e.namespace().unwrap_or("<none>"))
            })
            .collect();
        f.debug_struct("Dispatcher")
            .field("endpoints", &eps)
            .finish()
    }
}

impl Dispatcher {
    /// Exactly these endpoints, in this order.
    pub fn new(endpoints: Vec<Arc<dyn Endpoint>>) -> Self {
        Self { endpoints }
    }

    /// The endpoints nova-scheduler serves: the given ones, then nova's `BaseRPCAPI`
    /// (`baseapi` 1.1, service `service_name`), then oslo's ping endpoint when
    /// `rpc_ping_enabled` and no endpoint already has `oslo_rpc_server_ping`.
    pub fn with_builtins(
        mut endpoints: Vec<Arc<dyn Endpoint>>,
        service_name: &str,
        rpc_ping_enabled: bool,
    ) -> Self {
        let has_ping = endpoints.iter().any(|e| e.has_method(PingEndpoint::METHOD));
        endpoints.push(Arc::new(BaseApiEndpoint::new(service_name)));
        if rpc_ping_enabled {
            if has_ping {
                tracing::warn!(
                    "rpc_ping_enabled=True but oslo_rpc_server_ping is already declared by \
                     another endpoint; not adding the ping endpoint"
                );
            } else {
                endpoints.push(Arc::new(PingEndpoint));
            }
        }
        Self { endpoints }
    }

    /// The endpoint that handles `method` at `namespace`/`version`, or the dispatcher error
    /// oslo would raise.
    pub fn resolve(
        &self,
        method: &str,
        namespace: Option<&str>,
        version: &str,
    ) -> Result<Arc<dyn Endpoint>, RemoteError> {
        let mut found_compatible = false;
        for endpoint in &self.endpoints {
            if endpoint.namespace() != namespace {
                continue;
            }
            let (maj, min) = endpoint.version();
            match version_is_compatible(&format!("{maj}.{min}"), version) {
                Ok(true) => {}
                Ok(false) => continue,
                Err((class, message)) => return Err(RemoteError::builtin(class, message)),
            }
            if endpoint.has_method(method) && is_allowed(method) {
                return Ok(endpoint.clone());
            }
            found_compatible = true;
        }
        Err(if found_compatible {
            RemoteError::no_such_method(method)
        } else {
            RemoteError::unsupported_version(version, method)
        })
    }

    /// Resolve and run a call.
    pub fn dispatch(&self, call: IncomingCall) -> EndpointFuture {
        match self.resolve(&call.method, call.namespace.as_deref(), &call.version) {
            Ok(endpoint) => endpoint.call(call),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        }
    }
}

/// `DefaultRPCAccessPolicy`: private (underscore) methods are not dispatchable.
fn is_allowed(method: &str) -> bool {
    !method.starts_with('_')
}

/// nova's `BaseRPCAPI` (`nova/baserpc.py`): namespace `baseapi`, version 1.1.
#[derive(Clone, Debug)]
pub struct BaseApiEndpoint {
    service_name: String,
}

impl BaseApiEndpoint {
    /// `service_name` is what `ping` reports (`"scheduler"` for nova-scheduler).
    pub fn new(service_name: impl Into<String>) -> Self {
        Self {
            service_name: service_name.into(),
        }
    }
}

/// Python's TypeError for keyword arguments a method does not take.
fn check_kwargs(
    qualname: &str,
    args: &Map<String, Value>,
    allowed: &[&str],
) -> Result<(), RemoteError> {
    match args.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(RemoteError::type_error(format!(
            "{qualname}() got an unexpected keyword argument '{k}'"
        ))),
        None => Ok(()),
    }
}

impl Endpoint for BaseApiEndpoint {
    fn namespace(&self) -> Option<&str> {
        Some("baseapi")
    }

    fn version(&self) -> (u32, u32) {
        (1, 1)
    }

    fn has_method(&self, method: &str) -> bool {
        matches!(method, "ping" | "get_backdoor_port")
    }

    fn call(&self, call: IncomingCall) -> EndpointFuture {
        let result = match call.method.as_str() {
            "ping" => {
                check_kwargs("BaseRPCAPI.ping", &call.args, &["arg"]).and_then(|()| {
                    match call.args.get("arg") {
                        Some(arg) => Ok(json!({"service": self.service_name, "arg": arg})),
                        None => Err(RemoteError::type_error(
                            "BaseRPCAPI.ping() missing 1 required positional argument: 'arg'",
                        )),
                    }
                })
            }
            // No eventlet backdoor in this process.
            "get_backdoor_port" => {
                check_kwargs("BaseRPCAPI.get_backdoor_port", &call.args, &[]).map(|()| Value::Null)
            }
            other => Err(RemoteError::no_such_method(other)),
        };
        Box::pin(std::future::ready(result))
    }
}

/// oslo.messaging's `PingEndpoint` (no target: null namespace, version 1.0), added when
/// `rpc_ping_enabled`; takes any keyword arguments and answers `"pong"`.
#[derive(Clone, Copy, Debug, Default)]
pub struct PingEndpoint;

impl PingEndpoint {
    /// The reserved method name.
    pub const METHOD: &'static str = "oslo_rpc_server_ping";
}

impl Endpoint for PingEndpoint {
    fn namespace(&self) -> Option<&str> {
        None
    }

    fn version(&self) -> (u32, u32) {
        (1, 0)
    }

    fn has_method(&self, method: &str) -> bool {
        method == Self::METHOD
    }

    fn call(&self, _call: IncomingCall) -> EndpointFuture {
        Box::pin(std::future::ready(Ok(Value::String("pong".into()))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Manager;
    impl Endpoint for Manager {
        fn namespace(&self) -> Option<&str> {
            None
        }
        fn version(&self) -> (u32, u32) {
            (4, 5)
        }
        fn has_method(&self, method: &str) -> bool {
            matches!(method, "select_destinations" | "_private")
        }
        fn call(&self, _call: IncomingCall) -> EndpointFuture {
            Box::pin(std::future::ready(Ok(json!("manager"))))
        }
    }

    fn dispatcher(ping: bool) -> Dispatcher {
        Dispatcher::with_builtins(vec![Arc::new(Manager)], "scheduler", ping)
    }

    fn call(method: &str, namespace: Option<&str>, version: &str, args: Value) -> IncomingCall {
        IncomingCall {
            method: method.into(),
            namespace: namespace.map(Into::into),
            version: version.into(),
            args: args.as_object().cloned().unwrap_or_default(),
            context: RequestContext::default(),
            is_call: true,
            deadline: None,
            redelivered: false,
        }
    }

    async fn run(d: &Dispatcher, c: IncomingCall) -> Result<Value, RemoteError> {
        d.dispatch(c).await
    }

    #[tokio::test]
    async fn oslo_lookup_rules() {
        let d = dispatcher(false);
        let ok = run(&d, call("select_destinations", None, "4.0", json!({}))).await;
        assert_eq!(ok.unwrap(), json!("manager"));
        assert!(d.resolve("select_destinations", None, "4.5").is_ok());

        let e = d.resolve("nope", None, "4.5").err().unwrap();
        assert_eq!(e.class, "NoSuchMethod");
        assert_eq!(e.message, "Endpoint does not support RPC method nope");

        let e = d.resolve("_private", None, "4.5").err().unwrap();
        assert_eq!(e.class, "NoSuchMethod");

        for v in ["4.6", "5.0", "3.0"] {
            let e = d.resolve("select_destinations", None, v).err().unwrap();
            assert_eq!(e.class, "UnsupportedVersion");
            assert_eq!(e.module, "oslo_messaging.rpc.dispatcher");
            assert_eq!(
                e.message,
                format!("Endpoint does not support RPC version {v}. Attempted method: select_destinations")
            );
        }
        // Unknown namespace: nothing compatible.
        let e = d.resolve("ping", Some("other"), "1.0").err().unwrap();
        assert_eq!(e.class, "UnsupportedVersion");
        // Absent version is 1.0: no null-namespace endpoint at 1.x without ping.
        let e = d.resolve("select_destinations", None, "1.0").err().unwrap();
        assert_eq!(e.class, "UnsupportedVersion");
        // Malformed version raises what Python's int() raises.
        let e = d.resolve("select_destinations", None, "4").err().unwrap();
        assert_eq!(
            (e.class.as_str(), e.module.as_str()),
            ("IndexError", "builtins")
        );
    }

    #[tokio::test]
    async fn baseapi_and_ping() {
        let d = dispatcher(true);
        let r = run(
            &d,
            call("ping", Some("baseapi"), "1.1", json!({"arg": "hi"})),
        )
        .await;
        assert_eq!(r.unwrap(), json!({"service": "scheduler", "arg": "hi"}));
        let r = run(
            &d,
            call("get_backdoor_port", Some("baseapi"), "1.0", json!({})),
        )
        .await;
        assert_eq!(r.unwrap(), Value::Null);
        let e = run(&d, call("ping", Some("baseapi"), "1.1", json!({}))).await;
        assert_eq!(e.unwrap_err().class, "TypeError");
        let e = run(&d, call("ping", Some("baseapi"), "1.2", json!({"arg": 1}))).await;
        assert_eq!(e.unwrap_err().class, "UnsupportedVersion");

        let r = run(
            &d,
            call("oslo_rpc_server_ping", None, "1.0", json!({"x": 1})),
        )
        .await;
        assert_eq!(r.unwrap(), json!("pong"));
        // At 4.x only the manager is compatible and it has no ping method.
        let e = d
            .resolve("oslo_rpc_server_ping", None, "4.0")
            .err()
            .unwrap();
        assert_eq!(e.class, "NoSuchMethod");
        // Disabled: the 1.0 ping finds no compatible endpoint.
        let e = dispatcher(false)
            .resolve("oslo_rpc_server_ping", None, "1.0")
            .err()
            .unwrap();
        assert_eq!(e.class, "UnsupportedVersion");
    }
}
