// SPDX-License-Identifier: Apache-2.0
//! The Placement API as nova-scheduler calls it: `GET /allocation_candidates`,
//! claims (`PUT /allocations/{consumer}`) and their cleanup (`DELETE`), with nova's
//! microversions, headers, retry policy and error mapping
//! (`nova/scheduler/client/report.py`).
//!
//! Authentication follows the `[placement]` keystoneauth options: no auth,
//! `admin_token` (a fixed `X-Auth-Token`) and the keystone v3 plugins `password`,
//! `token` and `v3applicationcredential` (token cached until shortly before expiry,
//! endpoint from the catalog). The session options `cafile`, `certfile`/`keyfile`
//! (a client certificate), `insecure` and `timeout` shape the HTTP client.
//! Tokens, passwords and secrets never appear in logs, errors or `Debug` output.

mod auth;
mod candidates;
mod client;
pub mod index;
pub mod query;
pub mod resource_request;

pub use auth::{
    ApplicationCredentialAuth, PasswordAuth, PlacementAuth, Scope, TokenAuth, MIN_TOKEN_LIFE_SECS,
};
pub use candidates::AllocationCandidates;
pub use client::{
    beyond_the_caller, for_caller, BatchClaim, ConsumerClaim, CurrentAllocations, PlacementClient,
};
pub use query::{encode_query, QueryOptions};
pub use resource_request::{
    allocation_candidates_query, destination_target, resources_from_request_spec, RequestError,
    ResourceRequest, Target, TargetNode,
};

use std::path::PathBuf;
use std::time::Duration;

/// nova's `SAME_SUBTREE_VERSION`: candidates are read and claims written with it.
pub const CANDIDATES_VERSION: &str = "1.36";
/// nova's `CONSUMER_GENERATION_VERSION`: reading a consumer's allocations.
pub const CONSUMER_GENERATION_VERSION: &str = "1.28";

/// The limit of a request that serves no caller (keystone, taking claims back,
/// learning a write's outcome) when nova.conf sets no `[placement] timeout`.
/// keystoneauth waits without end; a Placement that hangs would then hold that work
/// as long as it hangs. A call's questions and claims get the caller's remaining
/// time instead ([`for_caller`]).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// `[placement]` options (keystoneauth session, auth and adapter options).
#[derive(Debug, Clone)]
pub struct PlacementOptions {
    /// `endpoint_override` (or the `admin_token` plugin's `endpoint`): the Placement
    /// root URL. Required unless `auth` is `Password`, which can use the catalog.
    pub endpoint: Option<String>,
    pub auth: PlacementAuth,
    /// `timeout`: per HTTP request. keystoneauth has none by default; unset, a call's
    /// requests get the caller's remaining time and the others [`DEFAULT_TIMEOUT`].
    pub timeout: Option<Duration>,
    /// `cafile`: PEM bundle of extra trusted CAs.
    pub cafile: Option<PathBuf>,
    /// `certfile`: the client certificate (PEM) presented to Placement; with it
    /// the key in `keyfile`, else in `certfile` itself.
    pub certfile: Option<PathBuf>,
    /// `keyfile`: the client certificate's private key (PEM).
    pub keyfile: Option<PathBuf>,
    /// `insecure`: skip TLS certificate verification.
    pub insecure: bool,
    /// `region_name`: catalog endpoints must be in this region.
    pub region_name: Option<String>,
    /// `service_type`: the catalog entry to use (`placement`).
    pub service_type: String,
    /// `service_name`: when set, the catalog entry must also have this name.
    pub service_name: Option<String>,
    /// `valid_interfaces` (`internal,public`): catalog interfaces, in preference order.
    pub valid_interfaces: Vec<String>,
    /// Unit of the claim retry sleep: before attempt *n* nova sleeps uniform
    /// `0..2n` seconds; the sleep is `uniform(0, 2n) × claim_retry_unit`. One second
    /// in production; tests make it small.
    pub claim_retry_unit: Duration,
}

impl Default for PlacementOptions {
    fn default() -> Self {
        PlacementOptions {
            endpoint: None,
            auth: PlacementAuth::None,
            timeout: None,
            cafile: None,
            certfile: None,
            keyfile: None,
            insecure: false,
            region_name: None,
            service_type: "placement".into(),
            service_name: None,
            valid_interfaces: vec!["internal".into(), "public".into()],
            claim_retry_unit: Duration::from_secs(1),
        }
    }
}

impl PlacementOptions {
    /// `[placement]` as keystoneauth reads it (see [`PlacementAuth::from_section`]).
    /// Pure: reads no file and connects nowhere.
    pub fn from_section(
        p: &crate::config::sections::PlacementSection,
    ) -> Result<PlacementOptions, PlacementError> {
        if p.keyfile.is_some() && p.certfile.is_none() {
            // keystoneauth drops a lone keyfile; a client certificate was meant.
            return Err(PlacementError::Config(
                "keyfile is set without certfile: set certfile to the client certificate".into(),
            ));
        }
        Ok(PlacementOptions {
            endpoint: p.endpoint_override.clone().or_else(|| p.endpoint.clone()),
            auth: PlacementAuth::from_section(p)?,
            timeout: p.timeout.map(Duration::from_secs_f64),
            cafile: p.cafile.as_ref().map(Into::into),
            certfile: p.certfile.as_ref().map(Into::into),
            keyfile: p.keyfile.as_ref().map(Into::into),
            insecure: p.insecure,
            region_name: p.region_name.clone(),
            service_type: p.service_type.clone(),
            service_name: p.service_name.clone(),
            valid_interfaces: p.valid_interfaces.clone(),
            ..PlacementOptions::default()
        })
    }
}

/// Everything startup refuses in `[placement]`, without connecting anywhere: the auth
/// plugin and its options, and the files `cafile`, `certfile` and `keyfile` (read,
/// parsed, and the key matched to the certificate). `config check` calls it.
pub fn check_config(p: &crate::config::sections::PlacementSection) -> Result<(), PlacementError> {
    PlacementClient::new(PlacementOptions::from_section(p)?).map(drop)
}

/// What can go wrong talking to Placement. Nothing here carries a token or password.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// Connection refused, DNS, TLS or timeout (nova: "Placement API service is not
    /// responding", a `ConnectFailure`).
    #[error("Placement API service is not responding: {0}")]
    Unreachable(String),
    /// A write (`PUT`, `POST`, `DELETE`) was sent but its answer never came
    /// (timeout, connection reset): Placement may or may not have applied it.
    #[error("Placement did not answer a write that was sent (it may have been applied): {0}")]
    AnswerLost(String),
    /// The caller's timeout passed before Placement answered a question (or before
    /// a claim was sent, which then was not).
    #[error("the caller stopped waiting before Placement answered {0}")]
    CallerGone(String),
    /// Keystone refused the credentials, or Placement answered 401.
    #[error("Placement service credentials do not work: {0}")]
    Unauthorized(String),
    /// No usable Placement endpoint (no override, nothing in the catalog).
    #[error("The placement API endpoint was not found: {0}")]
    EndpointNotFound(String),
    /// Placement answered with an unexpected status.
    #[error("Placement answered {status} to {method} {path}: {body}")]
    Http {
        status: u16,
        method: String,
        path: String,
        body: String,
    },
    /// A response body that is not what the API promises.
    #[error("unexpected response from {what}: {detail}")]
    BadResponse { what: String, detail: String },
    /// nova's `AllocationUpdateFailed` (consumer generation conflict): must fail
    /// the request, as in nova.
    #[error("Failed to update allocations for consumer {consumer_uuid}. Error: {error}")]
    AllocationUpdateFailed {
        consumer_uuid: String,
        error: String,
    },
    /// nova's `AllocationDeleteFailed`.
    #[error("Failed to delete allocations for consumer {consumer_uuid}. Error: {error}")]
    AllocationDeleteFailed {
        consumer_uuid: String,
        error: String,
    },
    /// Options that cannot work (missing endpoint, unreadable CA file, ...).
    #[error("invalid [placement] options: {0}")]
    Config(String),
}
