// SPDX-License-Identifier: Apache-2.0
//! `SchedulerReportClient`'s scheduler-side calls: allocation candidates, claims
//! and their cleanup.

use super::auth::{transport_text, truncate, Authenticator, CatalogFilter, Credentials};
use super::query::encode_query;
use super::AllocationCandidates;
use super::{PlacementError, PlacementOptions, CANDIDATES_VERSION, CONSUMER_GENERATION_VERSION};
use reqwest::Method;
use serde_json::{Map, Value};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

tokio::task_local! {
    /// When the caller of the call being served stops waiting (`None`: no caller).
    static CALLER_DEADLINE: Option<Instant>;
}

/// Runs `work` with the Placement requests it makes bounded by `deadline`, the
/// caller's, rather than by the fallback timeout: keystoneauth waits without end, the
/// caller does not. `[placement] timeout`, when set, bounds each request too.
pub async fn for_caller<F: Future>(deadline: Option<Instant>, work: F) -> F::Output {
    CALLER_DEADLINE.scope(deadline, work).await
}

/// Runs `work` beyond the caller's deadline: taking claims back and learning the
/// outcome of a write must finish after the caller has gone.
pub async fn beyond_the_caller<F: Future>(work: F) -> F::Output {
    CALLER_DEADLINE.scope(None, work).await
}

/// The client identity of `certfile` (and `keyfile`, else the key in `certfile`):
/// both read and parsed here, so a bad file is an error naming it.
fn client_identity(
    cert: &std::path::Path,
    key: Option<&std::path::Path>,
) -> Result<reqwest::Identity, PlacementError> {
    let read = |what: &str, path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| PlacementError::Config(format!("{what} {}: {e}", path.display())))
    };
    let mut pem = read("certfile", cert)?;
    if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
        return Err(PlacementError::Config(format!(
            "certfile {}: no PEM certificate in it",
            cert.display()
        )));
    }
    if let Some(key) = key {
        let key_pem = read("keyfile", key)?;
        if !String::from_utf8_lossy(&key_pem).contains("PRIVATE KEY-----") {
            return Err(PlacementError::Config(format!(
                "keyfile {}: no PEM private key in it",
                key.display()
            )));
        }
        pem.push(b'\n');
        pem.extend_from_slice(&key_pem);
    }
    let files = match key {
        Some(k) => format!("certfile {} / keyfile {}", cert.display(), k.display()),
        None => format!(
            "certfile {} (no keyfile: the key must be in it)",
            cert.display()
        ),
    };
    reqwest::Identity::from_pem(&pem)
        .map_err(|e| PlacementError::Config(format!("{files}: {}", error_chain(&e))))
}

/// An error with its causes, which reqwest's own text leaves out.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// nova's `@retries`: at most this many claim attempts.
const CLAIM_ATTEMPTS: u32 = 4;

/// Reads of a consumer after a write whose answer was lost.
const VERIFY_ATTEMPTS: u32 = 3;

/// Bytes of an answer's body reserved up front from its `Content-Length`; a
/// larger announced length (a body that big is not Placement's) grows as read.
const PREALLOCATED_BODY_MAX: u64 = 16 * 1024 * 1024;

/// A reused HTTP client for Placement.
pub struct PlacementClient {
    http: reqwest::Client,
    auth: Authenticator,
    retry_unit: Duration,
    /// `[placement] timeout`: each request's limit when set (the caller's remaining
    /// time may cut it shorter).
    timeout: Option<Duration>,
    /// True from the first request that could not reach Placement (or keystone)
    /// until one gets an answer again: the outage is logged once, not per request.
    outage: AtomicBool,
    /// Why Placement cannot serve now (unreachable, TLS refused, credentials
    /// refused), from the last request; `None` once one is answered. Readiness reads it.
    problem: std::sync::Mutex<Option<String>>,
}

/// One answer: status and body text.
struct Answer {
    status: u16,
    body: String,
}

/// What Placement did with a `POST /allocations` of several new consumers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchClaim {
    /// 204: every consumer holds its allocations.
    Claimed,
    /// Refused as a whole (capacity, a provider generation conflict, a provider
    /// gone, ...): nothing was written. The reason is Placement's text.
    Refused(String),
    /// 406: this Placement does not serve the microversion; claim per instance.
    Unsupported,
}

/// A consumer's allocations as nova's claim reads them before its `PUT`
/// (`GET /allocations/{uuid}` at microversion 1.28), read ahead of the claim by
/// [`PlacementClient::current_allocations`].
pub struct CurrentAllocations {
    consumer_uuid: String,
    answer: Answer,
}

impl std::fmt::Debug for CurrentAllocations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CurrentAllocations")
            .field("consumer_uuid", &self.consumer_uuid)
            .field("status", &self.answer.status)
            .finish_non_exhaustive()
    }
}

impl CurrentAllocations {
    /// The answer as JSON, when Placement answered 200.
    pub fn json(&self) -> Option<Value> {
        (self.answer.status == 200)
            .then(|| serde_json::from_str(&self.answer.body).ok())
            .flatten()
    }
}

/// What one claim attempt found.
enum Claim {
    Done(bool),
    Retry(String),
}

/// What one request knows of a consumer across its claims.
///
/// nova's claim reads the consumer before each `PUT` and keeps what it holds (an
/// evacuated instance holds its source allocation). When the answer to a `PUT` is
/// lost, that read may find the request's own write, and nova then keeps that too:
/// the instance ends holding a claim on every host tried. Here every `PUT` of a
/// request is built on what the consumer held before the request wrote anything.
#[derive(Debug, Clone, Default)]
pub struct ConsumerClaim {
    /// The consumer's allocations (provider → `{"resources": …}`) before this
    /// request wrote any; set by the first read.
    baseline: Option<Map<String, Value>>,
    /// Providers an earlier delivery of this request may have claimed in the
    /// consumer: never taken into the baseline.
    earlier: Vec<String>,
    /// A write whose outcome could not be learned: the consumer may hold it.
    uncertain: bool,
    /// Why the last claim on a host was not made, for the caller to log: one line
    /// per host at thousands of candidates is left to the request's summary.
    last_failure: Option<String>,
}

impl ConsumerClaim {
    /// A consumer whose allocations on `providers` were claimed by an earlier
    /// delivery of the same request (a daemon died before answering it).
    pub fn with_earlier_claims(providers: Vec<String>) -> Self {
        ConsumerClaim {
            earlier: providers,
            ..Self::default()
        }
    }

    /// The consumer may hold allocations this request (or an earlier delivery of
    /// it) wrote without knowing it: a failed request must take them back.
    pub fn needs_release(&self) -> bool {
        self.uncertain || !self.earlier.is_empty()
    }

    /// Why the last claim that returned `Ok(false)` was not made (taken once).
    pub fn take_failure(&mut self) -> Option<String> {
        self.last_failure.take()
    }

    /// What the consumer held before the request, once read (`None`: never read).
    pub fn baseline(&self) -> Option<&Map<String, Value>> {
        self.baseline.as_ref()
    }

    /// The baseline a read of the consumer (`GET /allocations/{uuid}` as JSON) gives:
    /// what it holds, less an earlier delivery's claims, resources only.
    pub fn baseline_from(&self, read: Option<&Value>) -> Map<String, Value> {
        read.and_then(|body| body["allocations"].as_object())
            .map(|held| {
                held.iter()
                    .filter(|(rp, _)| !self.earlier.contains(rp))
                    .map(|(rp, a)| {
                        (
                            rp.clone(),
                            serde_json::json!({ "resources": a["resources"] }),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// What a read after a lost answer found.
#[derive(Debug, PartialEq, Eq)]
enum Verified {
    /// The consumer holds what was sent.
    Written,
    /// It holds what it held before the request.
    NotWritten,
    /// It holds something else (an earlier write of this request, or another's).
    Other,
    /// It could not be read.
    Unknown,
}

// === impl PlacementClient ===

impl PlacementClient {
    /// Builds the client; no request is made until the first call.
    pub fn new(opts: PlacementOptions) -> Result<Self, PlacementError> {
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("nova-scheduler-rs/", env!("CARGO_PKG_VERSION")))
            .danger_accept_invalid_certs(opts.insecure);
        // Keystone's requests, and Placement's outside a call, get this; a call's get
        // the caller's remaining time (see `exchange`).
        builder = builder.timeout(opts.timeout.unwrap_or(super::DEFAULT_TIMEOUT));
        if let Some(path) = &opts.cafile {
            let pem = std::fs::read(path)
                .map_err(|e| PlacementError::Config(format!("cafile {}: {e}", path.display())))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| PlacementError::Config(format!("cafile {}: {e}", path.display())))?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        if let Some(cert) = &opts.certfile {
            builder = builder.identity(client_identity(cert, opts.keyfile.as_deref())?);
        }
        let http = builder.build().map_err(|e| {
            // The only file-dependent part left to fail here is the client identity
            // (rustls checks that the key belongs to the certificate).
            let files = match (&opts.certfile, &opts.keyfile) {
                (Some(c), Some(k)) => {
                    format!(" (certfile {}, keyfile {})", c.display(), k.display())
                }
                (Some(c), None) => format!(" (certfile {})", c.display()),
                _ => String::new(),
            };
            PlacementError::Config(format!("HTTP client{files}: {}", error_chain(&e)))
        })?;
        let auth = Authenticator::new(
            opts.auth,
            opts.endpoint,
            CatalogFilter {
                service_type: opts.service_type,
                service_name: opts.service_name,
                region_name: opts.region_name,
                valid_interfaces: opts.valid_interfaces,
            },
        )?;
        Ok(PlacementClient {
            http,
            auth,
            retry_unit: opts.claim_retry_unit,
            timeout: opts.timeout,
            outage: AtomicBool::new(false),
            problem: std::sync::Mutex::new(None),
        })
    }

    /// Authenticates now (keystone plugins), so that bad credentials show at once.
    pub async fn authenticate(&self) -> Result<(), PlacementError> {
        self.auth.credentials(&self.http).await.map(|_| ())
    }

    /// Asks Placement for its root document with this client's credentials, TLS
    /// identity and endpoint: `Ok` when it answers 200. A failure is also what
    /// [`Self::problem`] says until a request is answered.
    pub async fn probe(&self) -> Result<(), PlacementError> {
        let answer = self.request(Method::GET, "/", None, None, None).await?;
        if answer.status == 401 {
            let e = PlacementError::Unauthorized(format!(
                "Placement answered 401 to GET /: {}",
                truncate(&answer.body)
            ));
            self.set_problem(Some(e.to_string()));
            return Err(e);
        }
        if answer.status != 200 {
            return Err(http_error(Method::GET, "/", answer));
        }
        Ok(())
    }

    /// Why Placement cannot serve requests now (it cannot be reached, refuses the
    /// TLS handshake, or keystone or Placement refuse the credentials), as the last
    /// request found; `None` while requests are answered.
    pub fn problem(&self) -> Option<String> {
        self.problem
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_problem(&self, problem: Option<String>) {
        *self.problem.lock().unwrap_or_else(|e| e.into_inner()) = problem;
    }

    /// `GET /allocation_candidates?<query>` at 1.36. nova treats any error as "no
    /// candidates" (logging it); the caller decides, the error says what happened.
    pub async fn get_allocation_candidates(
        &self,
        query: &[(String, String)],
        global_request_id: Option<&str>,
    ) -> Result<AllocationCandidates, PlacementError> {
        let answer = self.candidates_answer(query, global_request_id).await?;
        AllocationCandidates::from_json(&answer.body)
    }

    /// The 200 answer of one `GET /allocation_candidates`.
    async fn candidates_answer(
        &self,
        query: &[(String, String)],
        global_request_id: Option<&str>,
    ) -> Result<Answer, PlacementError> {
        let path = format!("/allocation_candidates?{}", encode_query(query));
        let answer = self
            .request(
                Method::GET,
                &path,
                Some(CANDIDATES_VERSION),
                None,
                global_request_id,
            )
            .await?;
        if answer.status != 200 {
            return Err(http_error(Method::GET, "/allocation_candidates", answer));
        }
        Ok(answer)
    }

    /// [`Self::get_allocation_candidates`], with the answer's `provider_summaries`
    /// as Placement sent them (each provider's `resources`: `capacity` and `used`
    /// per class, every class of the provider at 1.27+). For the operator tools,
    /// which count what fits; a read, as every call here.
    pub async fn get_allocation_candidates_with_summaries(
        &self,
        query: &[(String, String)],
        global_request_id: Option<&str>,
    ) -> Result<(AllocationCandidates, Map<String, Value>), PlacementError> {
        let answer = self.candidates_answer(query, global_request_id).await?;
        let found = AllocationCandidates::from_json(&answer.body)?;
        let body = parse(&answer.body, "GET /allocation_candidates")?;
        let summaries = body
            .get("provider_summaries")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        Ok((found, summaries))
    }

    /// `GET path` at `microversion`: the JSON body of a 200, else the error. Reads
    /// only (the operator tools' `snapshot` of providers).
    pub async fn get_json(&self, path: &str, microversion: &str) -> Result<Value, PlacementError> {
        let answer = self
            .request(Method::GET, path, Some(microversion), None, None)
            .await?;
        if answer.status != 200 {
            return Err(http_error(Method::GET, path, answer));
        }
        parse(&answer.body, path)
    }

    /// nova's `SchedulerReportClient.claim_resources` for a new consumer
    /// (`consumer_generation=None`), at the candidates' microversion 1.36.
    ///
    /// `Ok(true)`: claimed. `Ok(false)`: not claimed, try the next host — any other
    /// Placement error, provider-generation conflicts after 4 attempts, and (as
    /// nova's `@safe_connect`) connection and keystone failures, which are logged.
    /// `Err(AllocationUpdateFailed)`: consumer generation conflict; nova lets it
    /// fail the whole request.
    pub async fn claim_resources(
        &self,
        consumer_uuid: &str,
        alloc_request: &Value,
        project_id: &str,
        user_id: &str,
        global_request_id: Option<&str>,
    ) -> Result<bool, PlacementError> {
        self.claim_resources_from(
            consumer_uuid,
            alloc_request,
            project_id,
            user_id,
            global_request_id,
            None,
            &mut ConsumerClaim::default(),
        )
        .await
    }

    /// nova's `GET /allocations/{uuid}` of a claim, on its own: what the consumer
    /// holds now (nothing for a new instance; its source allocation on an
    /// evacuation), to be handed to [`Self::claim_resources_from`].
    pub async fn current_allocations(
        &self,
        consumer_uuid: &str,
        global_request_id: Option<&str>,
    ) -> Result<CurrentAllocations, PlacementError> {
        let path = allocations_path(consumer_uuid);
        let answer = self
            .request(
                Method::GET,
                &path,
                Some(CONSUMER_GENERATION_VERSION),
                None,
                global_request_id,
            )
            .await?;
        Ok(CurrentAllocations {
            consumer_uuid: consumer_uuid.to_string(),
            answer,
        })
    }

    /// [`Self::claim_resources`] whose first attempt builds its `PUT` on `current`,
    /// read earlier, instead of reading the consumer's allocations again; later
    /// attempts read them again, as nova's every attempt does. The `PUT` carries the
    /// consumer generation that read saw (null for a new consumer), so a consumer
    /// whose allocations changed since is refused by Placement and fails the request
    /// with `AllocationUpdateFailed`, as a change between nova's `GET` and `PUT` does.
    ///
    /// `record` is what the request knows of the consumer from its earlier claims:
    /// the `PUT` keeps what the consumer held before the request (see
    /// [`ConsumerClaim`]). A `PUT` whose answer is lost (timeout, reset, 5xx) is
    /// followed by a read of the consumer: holding what was sent, it is claimed;
    /// unreadable, `record` says the consumer may hold it.
    #[allow(clippy::too_many_arguments)]
    pub async fn claim_resources_from(
        &self,
        consumer_uuid: &str,
        alloc_request: &Value,
        project_id: &str,
        user_id: &str,
        global_request_id: Option<&str>,
        mut current: Option<CurrentAllocations>,
        record: &mut ConsumerClaim,
    ) -> Result<bool, PlacementError> {
        // Another consumer's read is no read of this one: read again.
        debug_assert!(current
            .as_ref()
            .is_none_or(|c| c.consumer_uuid == consumer_uuid));
        current = current.filter(|c| c.consumer_uuid == consumer_uuid);
        record.last_failure = None;
        for attempt in 0..CLAIM_ATTEMPTS {
            if let Some(pause) = claim_retry_pause(attempt, self.retry_unit, rand::random()) {
                tokio::time::sleep(pause).await;
            }
            let outcome = self
                .claim_once(
                    consumer_uuid,
                    alloc_request,
                    project_id,
                    user_id,
                    global_request_id,
                    current.take(),
                    record,
                )
                .await;
            match outcome {
                Ok(Claim::Done(claimed)) => return Ok(claimed),
                Ok(Claim::Retry(reason)) => {
                    tracing::debug!(consumer_uuid, %reason, "Unable to claim_resources; retrying...");
                }
                Err(e @ PlacementError::AllocationUpdateFailed { .. }) => return Err(e),
                // Already logged once for the whole outage by `request`.
                Err(e @ PlacementError::Unreachable(_)) => {
                    tracing::debug!(consumer_uuid, error = %e, "claiming resources in Placement failed");
                    return Ok(false);
                }
                Err(e) => {
                    tracing::debug!(consumer_uuid, error = %e, "claiming resources in Placement failed");
                    record.last_failure = Some(e.to_string());
                    return Ok(false);
                }
            }
        }
        tracing::error!("Failed scheduler client operation claim_resources: out of retries");
        record.last_failure = Some("out of retries on provider generation conflicts".into());
        Ok(false)
    }

    #[allow(clippy::too_many_arguments)]
    async fn claim_once(
        &self,
        consumer_uuid: &str,
        alloc_request: &Value,
        project_id: &str,
        user_id: &str,
        global_request_id: Option<&str>,
        current: Option<CurrentAllocations>,
        record: &mut ConsumerClaim,
    ) -> Result<Claim, PlacementError> {
        let path = allocations_path(consumer_uuid);
        let Value::Object(requested) = alloc_request else {
            return Err(bad(
                "claim_resources",
                "the allocation request is not a dict",
            ));
        };
        let current = match current {
            Some(read_ahead) => read_ahead.answer,
            None => {
                self.current_allocations(consumer_uuid, global_request_id)
                    .await?
                    .answer
            }
        };
        // nova raises when the consumer cannot be read; no claim is written blind.
        if current.status != 200 {
            return Err(http_error(
                Method::GET,
                "/allocations/{consumer_uuid}",
                current,
            ));
        }
        let body: Value = parse(&current.body, "GET /allocations")?;
        let held = body["allocations"].as_object().cloned().unwrap_or_default();
        let held_generation = body["consumer_generation"].clone();
        if record.baseline.is_none() {
            let read = serde_json::json!({ "allocations": held });
            record.baseline = Some(record.baseline_from(Some(&read)));
        }
        let baseline = record.baseline.as_ref().expect("set above");
        let mut payload = if baseline.is_empty() {
            requested.clone()
        } else {
            // An evacuation: the instance still holds its source allocation.
            doubled_allocations(baseline, requested)
        };
        // nova sends the generation it read when the consumer holds allocations,
        // null for a new consumer.
        let consumer_generation = if held.is_empty() {
            Value::Null
        } else {
            match requested.get("consumer_generation") {
                Some(own) => own.clone(),
                None => held_generation,
            }
        };
        payload.insert("project_id".into(), Value::from(project_id));
        payload.insert("user_id".into(), Value::from(user_id));
        payload.insert("consumer_generation".into(), consumer_generation);
        let body = Value::Object(payload);
        let answer = match self
            .request(
                Method::PUT,
                &path,
                Some(CANDIDATES_VERSION),
                Some(&body),
                global_request_id,
            )
            .await
        {
            Ok(answer) if answer.status < 500 => answer,
            lost => {
                let why = match lost {
                    Ok(answer) => format!("{} {}", answer.status, truncate(&answer.body)),
                    Err(e @ PlacementError::AnswerLost(_)) => e.to_string(),
                    // Nothing was sent (connection refused, keystone down).
                    Err(e) => return Err(e),
                };
                let baseline = Value::Object(record.baseline.clone().unwrap_or_default());
                let verified = self
                    .verify_written(
                        consumer_uuid,
                        &body["allocations"],
                        &baseline,
                        global_request_id,
                    )
                    .await;
                tracing::debug!(consumer_uuid, %why, outcome = ?verified,
                    "the answer to a claim was lost; read the consumer's allocations to learn its outcome");
                if verified != Verified::Written {
                    record.last_failure = Some(format!(
                        "the answer was lost ({why}); the consumer's allocations read back: {verified:?}"
                    ));
                }
                // Only a read showing what the consumer held before the request (or
                // this write, which replaced everything) says nothing else of ours is there.
                record.uncertain = matches!(verified, Verified::Unknown | Verified::Other);
                return Ok(Claim::Done(verified == Verified::Written));
            }
        };
        if answer.status == 204 {
            record.uncertain = false;
            return Ok(Claim::Done(true));
        }
        tracing::debug!(consumer_uuid, status = answer.status, body = %truncate(&answer.body),
            "Failed to save allocation");
        record.last_failure = Some(format!(
            "Failed to save allocation for {consumer_uuid}. Got HTTP {}: {}",
            answer.status,
            truncate(&answer.body)
        ));
        claim_failure(consumer_uuid, &answer)
    }

    /// After a write whose answer was lost: does the consumer hold `sent`? Read up
    /// to three times, a little apart, before saying it cannot be known.
    async fn verify_written(
        &self,
        consumer_uuid: &str,
        sent: &Value,
        baseline: &Value,
        global_request_id: Option<&str>,
    ) -> Verified {
        beyond_the_caller(self.verify_written_now(consumer_uuid, sent, baseline, global_request_id))
            .await
    }

    async fn verify_written_now(
        &self,
        consumer_uuid: &str,
        sent: &Value,
        baseline: &Value,
        global_request_id: Option<&str>,
    ) -> Verified {
        for attempt in 0..VERIFY_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(self.retry_unit.mul_f64(0.5 * f64::from(attempt))).await;
            }
            let Ok(read) = self
                .current_allocations(consumer_uuid, global_request_id)
                .await
            else {
                continue;
            };
            if read.answer.status != 200 {
                continue;
            }
            let Ok(body) = serde_json::from_str::<Value>(&read.answer.body) else {
                continue;
            };
            let held = &body["allocations"];
            return if same_allocations(held, sent) {
                Verified::Written
            } else if same_allocations(held, baseline) {
                Verified::NotWritten
            } else {
                Verified::Other
            };
        }
        Verified::Unknown
    }

    /// Puts a consumer back to what it held before a failed request: `baseline`
    /// written over whatever it holds now, or its allocations deleted when it held
    /// none (nova's cleanup). Nothing is written when it holds `baseline` already.
    pub async fn restore_allocations(
        &self,
        consumer_uuid: &str,
        baseline: Option<&Map<String, Value>>,
        project_id: &str,
        user_id: &str,
    ) -> Result<(), PlacementError> {
        let Some(baseline) = baseline.filter(|b| !b.is_empty()) else {
            return self.delete_allocation_for_instance(consumer_uuid).await;
        };
        let read = self.current_allocations(consumer_uuid, None).await?;
        let body: Value = parse(&read.answer.body, "GET /allocations")?;
        let want = Value::Object(baseline.clone());
        if same_allocations(&body["allocations"], &want) {
            return Ok(());
        }
        let put = serde_json::json!({
            "allocations": want,
            "project_id": project_id,
            "user_id": user_id,
            "consumer_generation": body["consumer_generation"],
        });
        let answer = self
            .request(
                Method::PUT,
                &allocations_path(consumer_uuid),
                Some(CANDIDATES_VERSION),
                Some(&put),
                None,
            )
            .await?;
        if answer.status == 204 {
            tracing::info!(
                consumer_uuid,
                "Restored the allocations the instance held before the request"
            );
            return Ok(());
        }
        Err(PlacementError::AllocationDeleteFailed {
            consumer_uuid: consumer_uuid.to_string(),
            error: truncate(&answer.body),
        })
    }

    /// `POST /allocations` (Placement's multi-consumer write, microversion 1.13+) for
    /// new consumers, each with its allocation request: one transaction in
    /// Placement, so either every consumer holds its allocations or none does.
    ///
    /// Sent at [`CANDIDATES_VERSION`] (1.36, what nova's `PUT` uses): the body per
    /// consumer is the `PUT` body of that version (`allocations`, `mappings`,
    /// `project_id`, `user_id`, `consumer_generation`: null for a new consumer). No
    /// `consumer_type` (required from 1.38 only); Placement records its default, as
    /// for nova's `PUT`.
    ///
    /// `Err(AllocationUpdateFailed)`: a consumer generation conflict (one of the
    /// consumers exists after all), reported for the first consumer since
    /// Placement's message names none; nova fails the request on it too.
    pub async fn claim_batch(
        &self,
        claims: &[(String, &Value)],
        project_id: &str,
        user_id: &str,
        global_request_id: Option<&str>,
    ) -> Result<BatchClaim, PlacementError> {
        let mut body = Map::new();
        for (consumer_uuid, alloc_request) in claims {
            let Value::Object(request) = alloc_request else {
                return Err(bad("claim_batch", "an allocation request is not a dict"));
            };
            let mut entry = Map::new();
            for key in ["allocations", "mappings"] {
                if let Some(v) = request.get(key) {
                    entry.insert(key.into(), v.clone());
                }
            }
            entry.insert("project_id".into(), Value::from(project_id));
            entry.insert("user_id".into(), Value::from(user_id));
            entry.insert("consumer_generation".into(), Value::Null);
            body.insert(consumer_uuid.clone(), Value::Object(entry));
        }
        let body = Value::Object(body);
        let answer = match self
            .request(
                Method::POST,
                "/allocations",
                Some(CANDIDATES_VERSION),
                Some(&body),
                global_request_id,
            )
            .await
        {
            Ok(answer) if answer.status < 500 => answer,
            Ok(answer) => {
                let why = format!("{} {}", answer.status, truncate(&answer.body));
                return beyond_the_caller(self.settle_lost_batch(&body, why, global_request_id))
                    .await;
            }
            Err(e @ PlacementError::AnswerLost(_)) => {
                return beyond_the_caller(self.settle_lost_batch(
                    &body,
                    e.to_string(),
                    global_request_id,
                ))
                .await;
            }
            Err(e) => return Err(e),
        };
        match answer.status {
            204 => Ok(BatchClaim::Claimed),
            406 => Ok(BatchClaim::Unsupported),
            _ => {
                let first = claims.first().map(|(u, _)| u.as_str()).unwrap_or_default();
                tracing::warn!(consumers = claims.len(), status = answer.status,
                    body = %truncate(&answer.body), "Failed to save allocations (batch)");
                // A consumer generation conflict is an error; anything else refused
                // the whole batch and nothing was written.
                claim_failure(first, &answer)?;
                Ok(BatchClaim::Refused(truncate(&answer.body)))
            }
        }
    }

    /// A batched claim whose answer was lost: Placement applies a `POST
    /// /allocations` whole or not at all, so reading the consumers tells which. When
    /// they cannot all be read, every consumer's allocations are deleted (they are
    /// new consumers: nothing else of theirs is lost) and the batch counts as refused.
    async fn settle_lost_batch(
        &self,
        body: &Value,
        why: String,
        global_request_id: Option<&str>,
    ) -> Result<BatchClaim, PlacementError> {
        let consumers = body.as_object().cloned().unwrap_or_default();
        let mut written = 0;
        let mut unknown = 0;
        for (consumer_uuid, entry) in &consumers {
            match self
                .verify_written(
                    consumer_uuid,
                    &entry["allocations"],
                    &serde_json::json!({}),
                    global_request_id,
                )
                .await
            {
                Verified::Written => written += 1,
                Verified::NotWritten => {}
                Verified::Other | Verified::Unknown => unknown += 1,
            }
        }
        tracing::warn!(consumers = consumers.len(), written, unknown, %why,
            "the answer to a batched claim was lost; read the consumers to learn its outcome");
        if unknown == 0 && written == consumers.len() {
            return Ok(BatchClaim::Claimed);
        }
        if unknown == 0 && written == 0 {
            return Ok(BatchClaim::Refused(why));
        }
        let mut first_error = None;
        for consumer_uuid in consumers.keys() {
            if let Err(e) = self.delete_allocation_for_instance(consumer_uuid).await {
                tracing::error!(consumer_uuid, error = %e,
                    "could not delete the allocations of a batched claim whose outcome is unknown");
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(BatchClaim::Refused(why)),
        }
    }

    /// `DELETE /allocations/{uuid}` without a microversion header (nova's
    /// `force=True` cleanup). 2xx and 404 are fine; another status is
    /// `AllocationDeleteFailed`. A connection failure is `Unreachable`: nova logs it
    /// and goes on.
    pub async fn delete_allocation_for_instance(
        &self,
        consumer_uuid: &str,
    ) -> Result<(), PlacementError> {
        let path = allocations_path(consumer_uuid);
        let answer = self
            .request(Method::DELETE, &path, None, None, None)
            .await?;
        match answer.status {
            200..=399 => {
                tracing::info!(consumer_uuid, "Deleted allocations for instance");
                Ok(())
            }
            404 => Ok(()),
            status => {
                tracing::warn!(consumer_uuid, status, body = %truncate(&answer.body),
                    "Unable to delete allocation for instance");
                Err(PlacementError::AllocationDeleteFailed {
                    consumer_uuid: consumer_uuid.to_string(),
                    error: answer.body,
                })
            }
        }
    }

    /// True while Placement (or keystone) cannot be reached: from the first
    /// transport failure until a request gets an answer again.
    pub fn in_outage(&self) -> bool {
        self.outage.load(Ordering::Relaxed)
    }

    /// [`Self::attempt`], logging a start of outage once (a warning) and its end
    /// once (info); failures in between are debug lines.
    async fn request(
        &self,
        method: Method,
        path: &str,
        microversion: Option<&str>,
        body: Option<&Value>,
        global_request_id: Option<&str>,
    ) -> Result<Answer, PlacementError> {
        let result = self
            .attempt(method, path, microversion, body, global_request_id)
            .await;
        match &result {
            Err(e @ (PlacementError::Unreachable(_) | PlacementError::AnswerLost(_))) => {
                if !self.outage.swap(true, Ordering::Relaxed) {
                    tracing::warn!(error = %e, "Placement API service is not responding; \
                        requests get NoValidHost until it answers (logged once per outage)");
                } else {
                    tracing::debug!(error = %e, "Placement still not responding");
                }
            }
            Ok(_) => {
                if self.outage.swap(false, Ordering::Relaxed) {
                    tracing::info!("Placement API service is answering again");
                }
            }
            Err(_) => {}
        }
        match &result {
            Err(
                e @ (PlacementError::Unreachable(_)
                | PlacementError::AnswerLost(_)
                | PlacementError::Unauthorized(_)
                | PlacementError::EndpointNotFound(_)),
            ) => self.set_problem(Some(e.to_string())),
            Ok(answer) if answer.status == 401 => self.set_problem(Some(format!(
                "Placement service credentials do not work: Placement answered 401 to {path}"
            ))),
            Ok(_) => self.set_problem(None),
            Err(_) => {}
        }
        result
    }

    /// Sends one request with nova's headers; on a 401 with password auth, gets a
    /// new token and sends it once more (keystoneauth's re-authentication).
    async fn attempt(
        &self,
        method: Method,
        path: &str,
        microversion: Option<&str>,
        body: Option<&Value>,
        global_request_id: Option<&str>,
    ) -> Result<Answer, PlacementError> {
        let creds = self.auth.credentials(&self.http).await?;
        let answer = self
            .send(&creds, &method, path, microversion, body, global_request_id)
            .await?;
        if answer.status != 401 || !self.auth.can_reauthenticate() {
            return Ok(answer);
        }
        self.auth.invalidate().await;
        let creds = self.auth.credentials(&self.http).await?;
        self.send(&creds, &method, path, microversion, body, global_request_id)
            .await
    }

    async fn send(
        &self,
        creds: &Credentials,
        method: &Method,
        path: &str,
        microversion: Option<&str>,
        body: Option<&Value>,
        global_request_id: Option<&str>,
    ) -> Result<Answer, PlacementError> {
        let started = std::time::Instant::now();
        let answer = self
            .exchange(creds, method, path, microversion, body, global_request_id)
            .await;
        let status = answer.as_ref().ok().map(|a| a.status);
        crate::observe::metrics().placement_request(
            method.as_str(),
            path,
            status,
            started.elapsed(),
        );
        answer
    }

    /// One HTTP request and its whole answer.
    async fn exchange(
        &self,
        creds: &Credentials,
        method: &Method,
        path: &str,
        microversion: Option<&str>,
        body: Option<&Value>,
        global_request_id: Option<&str>,
    ) -> Result<Answer, PlacementError> {
        let url = format!("{}{path}", creds.endpoint);
        let mut req = self
            .http
            .request(method.clone(), &url)
            .header("Accept", "application/json");
        if let Some(token) = &creds.token {
            req = req.header("X-Auth-Token", token);
        }
        if let Some(v) = microversion {
            req = req.header("OpenStack-API-Version", format!("placement {v}"));
        }
        if let Some(id) = global_request_id {
            req = req.header("X-OpenStack-Request-ID", id);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        // A write that may have reached Placement is not a write that failed.
        let is_write = *method != Method::GET;
        let caller = CALLER_DEADLINE.try_with(|d| *d).ok().flatten();
        if let Some(deadline) = caller {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                // Nothing is sent: no claim is written after the caller has gone.
                return Err(PlacementError::CallerGone(format!("{method} {path}")));
            }
            req = req.timeout(self.timeout.map_or(remaining, |t| t.min(remaining)));
        }
        let unreachable = |e: reqwest::Error| {
            if is_write && !e.is_connect() {
                PlacementError::AnswerLost(transport_text(e))
            } else {
                PlacementError::Unreachable(transport_text(e))
            }
        };
        let caller_gone = |e: reqwest::Error| {
            let past = caller.is_some_and(|d| Instant::now() >= d);
            if past && e.is_timeout() && !is_write {
                PlacementError::CallerGone(format!("{method} {path}"))
            } else {
                unreachable(e)
            }
        };
        let mut resp = req.send().await.map_err(caller_gone)?;
        let status = resp.status().as_u16();
        // Read into one buffer of the announced length: a candidates answer is
        // hundreds of KiB at 1,000 hosts, and growing a buffer chunk by chunk then
        // copying it into a String (what `text()` does) cost a visible share of our
        // CPU per request.
        let announced = resp
            .content_length()
            .unwrap_or(0)
            .min(PREALLOCATED_BODY_MAX);
        let mut bytes = Vec::with_capacity(usize::try_from(announced).unwrap_or(0));
        while let Some(chunk) = resp.chunk().await.map_err(caller_gone)? {
            bytes.extend_from_slice(&chunk);
        }
        let body = String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        Ok(Answer { status, body })
    }
}

/// nova's `@retries` pause before claim attempt `attempt` (from 0): uniform(0,
/// 2 × attempt) units, `draw` being the uniform draw in [0, 1). None before the
/// first attempt: nova's `time.sleep(0)` returns at once, a tokio sleep of zero
/// waits for the timer's next tick (up to 1 ms on every claim's critical path).
fn claim_retry_pause(attempt: u32, unit: Duration, draw: f64) -> Option<Duration> {
    (attempt > 0).then(|| unit.mul_f64(draw * f64::from(attempt * 2)))
}

/// `/allocations/{uuid}` with the uuid percent-encoded: a consumer id never
/// changes the path it is written into.
fn allocations_path(consumer_uuid: &str) -> String {
    format!(
        "/allocations/{}",
        percent_encoding::utf8_percent_encode(consumer_uuid, PATH_SEGMENT)
    )
}

/// Letters, digits, `-`, `_` and `~` stay as they are (a UUID is unchanged); a dot
/// is encoded too, so that no id is a `..` segment.
const PATH_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'~');

/// Two `allocations` maps hold the same resources on the same providers
/// (Placement's answers carry provider generations as well; they are not compared).
fn same_allocations(got: &Value, want: &Value) -> bool {
    let (Some(got), Some(want)) = (got.as_object(), want.as_object()) else {
        return false;
    };
    got.len() == want.len()
        && want.iter().all(|(rp, a)| {
            got.get(rp)
                .is_some_and(|g| g["resources"] == a["resources"])
        })
}

/// nova's `_move_operation_alloc_request`: the existing allocations (resources only)
/// plus every provider of the new request not already allocated; no `mappings`.
fn doubled_allocations(
    existing: &Map<String, Value>,
    new: &Map<String, Value>,
) -> Map<String, Value> {
    let mut allocations: Map<String, Value> = existing
        .iter()
        .map(|(rp, a)| {
            (
                rp.clone(),
                serde_json::json!({ "resources": a["resources"] }),
            )
        })
        .collect();
    if let Some(Value::Object(requested)) = new.get("allocations") {
        for (rp, a) in requested {
            if !existing.contains_key(rp) {
                allocations.insert(rp.clone(), a.clone());
            }
        }
    }
    let mut payload = Map::new();
    payload.insert("allocations".into(), Value::Object(allocations));
    payload
}

/// Reads `errors[0]` of a failed PUT as nova does.
fn claim_failure(consumer_uuid: &str, answer: &Answer) -> Result<Claim, PlacementError> {
    let body: Value = serde_json::from_str(&answer.body).unwrap_or(Value::Null);
    let err = &body["errors"][0];
    if err["code"].as_str() != Some("placement.concurrent_update") {
        return Ok(Claim::Done(false));
    }
    if err["detail"]
        .as_str()
        .is_some_and(|d| d.contains("consumer generation conflict"))
    {
        return Err(PlacementError::AllocationUpdateFailed {
            consumer_uuid: consumer_uuid.to_string(),
            error: format!(
                "another process changed the consumer {consumer_uuid} after the report client \
                 read the consumer state during the claim "
            ),
        });
    }
    Ok(Claim::Retry(format!(
        "another process changed the resource providers involved in our attempt to put \
         allocations for consumer {consumer_uuid}"
    )))
}

fn parse(body: &str, what: &str) -> Result<Value, PlacementError> {
    serde_json::from_str(body).map_err(|e| bad(what, &format!("invalid JSON: {e}")))
}

fn bad(what: &str, detail: &str) -> PlacementError {
    PlacementError::BadResponse {
        what: what.to_string(),
        detail: detail.to_string(),
    }
}

fn http_error(method: Method, path: &str, answer: Answer) -> PlacementError {
    PlacementError::Http {
        status: answer.status,
        method: method.to_string(),
        path: path.to_string(),
        body: truncate(&answer.body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn consumer_ids_cannot_leave_their_path_segment() {
        let uuid = "8e6d9835-05b7-4d3f-b4a6-7ba36a46cb3b";
        assert_eq!(allocations_path(uuid), format!("/allocations/{uuid}"));
        assert_eq!(allocations_path(".."), "/allocations/%2E%2E");
        assert_eq!(
            allocations_path("../../resource_providers?x=1"),
            "/allocations/%2E%2E%2F%2E%2E%2Fresource_providers%3Fx%3D1"
        );
    }

    #[test]
    fn allocations_compare_by_provider_and_resources_not_generation() {
        let got = json!({"a": {"generation": 7, "resources": {"VCPU": 1}}});
        assert!(same_allocations(
            &got,
            &json!({"a": {"resources": {"VCPU": 1}}})
        ));
        assert!(!same_allocations(
            &got,
            &json!({"a": {"resources": {"VCPU": 2}}})
        ));
        assert!(!same_allocations(
            &got,
            &json!({"a": {"resources": {"VCPU": 1}}, "b": {"resources": {"VCPU": 1}}})
        ));
        assert!(!same_allocations(
            &json!({}),
            &json!({"a": {"resources": {}}})
        ));
    }

    #[test]
    fn doubling_keeps_existing_and_adds_new_providers() {
        let existing = obj(json!({
            "src": {"generation": 3, "resources": {"VCPU": 1}},
            "shared": {"generation": 1, "resources": {"DISK_GB": 10}}
        }));
        let new = obj(json!({
            "allocations": {"dst": {"resources": {"VCPU": 1}}, "shared": {"resources": {"DISK_GB": 10}}},
            "mappings": {"": ["dst"]}
        }));
        let doubled = doubled_allocations(&existing, &new);
        assert_eq!(
            Value::Object(doubled),
            json!({"allocations": {
                "src": {"resources": {"VCPU": 1}},
                "shared": {"resources": {"DISK_GB": 10}},
                "dst": {"resources": {"VCPU": 1}}
            }})
        );
    }

    #[test]
    fn the_first_claim_attempt_is_not_delayed_and_retries_wait_as_novas() {
        let unit = Duration::from_secs(1);
        assert_eq!(claim_retry_pause(0, unit, 0.0), None);
        assert_eq!(claim_retry_pause(0, unit, 0.99), None);
        assert_eq!(claim_retry_pause(1, unit, 0.0), Some(Duration::ZERO));
        assert_eq!(
            claim_retry_pause(1, unit, 0.5),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            claim_retry_pause(3, unit, 0.25),
            Some(Duration::from_millis(1500))
        );
        let ms = Duration::from_millis(1);
        assert_eq!(
            claim_retry_pause(2, ms, 0.5),
            Some(Duration::from_millis(2))
        );
    }

    #[test]
    fn failure_classification() {
        let answer = |body: Value| Answer {
            status: 409,
            body: body.to_string(),
        };
        let conflict = |detail: &str| {
            answer(json!({"errors": [{"code": "placement.concurrent_update", "detail": detail}]}))
        };
        assert!(matches!(
            claim_failure(
                "c",
                &conflict("consumer generation conflict - expected null but got 1")
            ),
            Err(PlacementError::AllocationUpdateFailed { .. })
        ));
        assert!(matches!(
            claim_failure("c", &conflict("resource provider generation conflict")),
            Ok(Claim::Retry(_))
        ));
        let capacity = answer(
            json!({"errors": [{"code": "placement.undefined_code", "detail": "Unable to allocate"}]}),
        );
        assert!(matches!(
            claim_failure("c", &capacity),
            Ok(Claim::Done(false))
        ));
        let not_json = Answer {
            status: 500,
            body: "<html>".into(),
        };
        assert!(matches!(
            claim_failure("c", &not_json),
            Ok(Claim::Done(false))
        ));
    }
}
