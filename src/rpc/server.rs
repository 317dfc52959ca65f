// SPDX-License-Identifier: Apache-2.0
//! The RPC server: consume loop, per-delivery tasks, replies, call-monitor heartbeats,
//! reconnection and graceful shutdown.
//!
//! Acknowledgement rule of this project (stricter than Python, which acks on receipt):
//! a call is acked only after its final reply was confirmed by the broker (or the reply
//! was abandoned because the caller's queue is gone); a cast after its handler returned;
//! an undecodable message after its failure reply (if one could be addressed). Nothing is
//! ever requeued by this server; a delivery stays unacked only while it is being handled,
//! so a crash or connection loss hands it back to the broker.

use crate::observe::metrics::metrics;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::stream::{self, BoxStream, StreamExt};
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicCancelOptions, QueueDeleteOptions};
use lapin::{Acker, Channel, Connection};
use serde_json::Value;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tracing::{debug, error, info, info_span, warn, Instrument};

use super::dispatcher::{Dispatcher, Endpoint, IncomingCall};
use super::envelope::{self, Request};
use super::failure::{RemoteError, DISPATCHER_MODULE, NOVA_EXCEPTION_MODULE};
use super::journal::{Admission, InflightJournal};
use super::options::RpcServerOptions;
use super::topology::{self, Topology};
use super::transport::{Backoff, Connector, Published, ReplyPublisher};
use super::RpcError;

/// What nova's `BaseRPCAPI.ping` reports as the service.
pub const SERVICE_NAME: &str = "scheduler";
/// oslo's `_MsgIdCache.DUP_MSG_CHECK_SIZE`.
const DEDUPE_WINDOW: usize = 16;
/// oslo's `ObsoleteReplyQueuesCache`: 200 queues for 60 s.
const GONE_QUEUES_SIZE: usize = 200;
const GONE_QUEUES_TTL: Duration = Duration::from_secs(60);
/// Pause between publishes of a reply whose queue is missing.
const MISSING_QUEUE_RETRY: Duration = Duration::from_millis(250);

/// An oslo.messaging RPC server for one topic/server pair.
pub struct RpcServer {
    shared: Arc<Shared>,
    ready: watch::Sender<bool>,
}

impl std::fmt::Debug for RpcServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcServer")
            .field("topology", &self.shared.topology)
            .field("dispatcher", &self.shared.dispatcher)
            .finish_non_exhaustive()
    }
}

/// State shared by the consume loop and the delivery tasks.
struct Shared {
    opts: Arc<RpcServerOptions>,
    topology: Topology,
    dispatcher: Dispatcher,
    publisher: ReplyPublisher,
    compress: bool,
    permits: Arc<Semaphore>,
    seen: Mutex<VecDeque<String>>,
    gone: Mutex<GoneQueues>,
    journal: InflightJournal,
}

/// The listener's connection and its single channel.
struct Session {
    connection: Connection,
    channel: Channel,
}

// Short-lived, one per delivery: not worth a Box.
#[allow(clippy::large_enum_variant)]
enum ConsumerEvent {
    Delivery(lapin::Result<Delivery>),
    Ended(String),
}

impl RpcServer {
    /// Validate the options and build the server. `endpoints` are tried in order, then
    /// nova's `baseapi` endpoint and (with `rpc_ping_enabled`) oslo's ping endpoint.
    /// The private fanout queue name is chosen here and kept across reconnects.
    pub fn new(
        opts: RpcServerOptions,
        endpoints: Vec<Arc<dyn Endpoint>>,
    ) -> Result<Self, RpcError> {
        opts.validate()?;
        let compress = opts.compress_replies()?;
        let journal = match &opts.state_dir {
            // Older entries belong to messages the broker has expired.
            // One directory per server name: daemons sharing a state_dir keep apart.
            Some(dir) => InflightJournal::open(
                &dir.join(format!("inflight-{}", opts.server)),
                opts.max_message_crashes,
                opts.call_timeout,
            ),
            None => InflightJournal::disabled(),
        };
        let opts = Arc::new(opts);
        let shared = Shared {
            topology: Topology::new(&opts),
            dispatcher: Dispatcher::with_builtins(endpoints, SERVICE_NAME, opts.rpc_ping_enabled),
            publisher: ReplyPublisher::new(opts.clone())?,
            compress,
            permits: Arc::new(Semaphore::new(opts.max_concurrent_calls)),
            seen: Mutex::new(VecDeque::with_capacity(DEDUPE_WINDOW)),
            gone: Mutex::new(GoneQueues::default()),
            journal,
            opts,
        };
        Ok(Self {
            shared: Arc::new(shared),
            ready: watch::channel(false).0,
        })
    }

    /// Names of the exchanges and queues this server declares.
    pub fn topology(&self) -> &Topology {
        &self.shared.topology
    }

    /// `true` while the three consumers are active (after "scheduler ready").
    pub fn ready(&self) -> watch::Receiver<bool> {
        self.ready.subscribe()
    }

    /// Serve until `shutdown` completes, reconnecting as needed; then stop consuming, wait
    /// up to `shutdown_grace` for in-flight deliveries, delete the private fanout queue
    /// and close. Broker unavailability is retried forever; only option errors are fatal.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), RpcError> {
        let shared = self.shared.clone();
        let opts = shared.opts.clone();
        let topo = &shared.topology;
        let listener = Connector::new(opts.clone(), "listen")?;
        let mut backoff = Backoff::new(&opts);
        let mut session: Option<Session> = None;
        tokio::pin!(shutdown);

        'run: loop {
            let established = tokio::select! {
                biased;
                () = &mut shutdown => break 'run,
                r = establish(&listener, &opts, topo) => r,
            };
            let (sess, consumers) = match established {
                Ok(ok) => ok,
                Err(e) => {
                    let delay = backoff.next_delay();
                    warn!(error = %e, retry_in = ?delay, "RPC listener could not start; retrying");
                    tokio::select! {
                        biased;
                        () = &mut shutdown => break 'run,
                        () = tokio::time::sleep(delay) => continue 'run,
                    }
                }
            };
            backoff.reset();
            info!(
                topic = %opts.topic, server = %opts.server, exchange = %topo.exchange,
                fanout_queue = %topo.fanout_queue, "scheduler ready"
            );
            self.ready.send_replace(true);
            metrics().rpc_consuming.set(1);

            let mut events = stream::select_all(consumers.into_iter().map(consumer_events));
            let lost = loop {
                tokio::select! {
                    biased;
                    () = &mut shutdown => {
                        session = Some(sess);
                        break 'run;
                    }
                    event = events.next() => match event {
                        Some(ConsumerEvent::Delivery(Ok(delivery))) => {
                            let permit = tokio::select! {
                                biased;
                                () = &mut shutdown => {
                                    // Not acked: the broker hands it out again.
                                    session = Some(sess);
                                    break 'run;
                                }
                                p = shared.permits.clone().acquire_owned() => {
                                    p.expect("the semaphore is never closed")
                                }
                            };
                            tokio::spawn(shared.clone().handle_delivery(delivery, permit));
                        }
                        Some(ConsumerEvent::Delivery(Err(e))) => break format!("consumer error: {e}"),
                        Some(ConsumerEvent::Ended(tag)) => {
                            break format!("consumer {tag} was cancelled or its channel closed")
                        }
                        None => break "all consumers ended".to_string(),
                    }
                }
            };
            self.ready.send_replace(false);
            metrics().rpc_consuming.set(0);
            metrics().reconnects.inc();
            let delay = backoff.next_delay();
            warn!(reason = %lost, retry_in = ?delay, "RPC listener lost its connection; reconnecting");
            let _ = sess.connection.close(320, "reconnecting".into()).await;
            tokio::select! {
                biased;
                () = &mut shutdown => break 'run,
                () = tokio::time::sleep(delay) => {}
            }
        }

        self.ready.send_replace(false);
        metrics().rpc_consuming.set(0);
        shared.shutdown(session, &listener).await;
        Ok(())
    }
}

/// Connect, open the channel, declare everything and start the three consumers.
async fn establish(
    listener: &Connector,
    opts: &RpcServerOptions,
    topo: &Topology,
) -> Result<(Session, Vec<lapin::Consumer>), RpcError> {
    let connection = listener.connect_round().await?;
    let result = async {
        let channel = topology::open_listener_channel(&connection, opts).await?;
        let channel = topology::declare_all(&connection, channel, opts, topo).await?;
        let consumers = topology::consume_all(&channel, opts, topo).await?;
        Ok::<_, RpcError>((channel, consumers))
    }
    .await;
    match result {
        Ok((channel, consumers)) => Ok((
            Session {
                connection,
                channel,
            },
            consumers,
        )),
        Err(e) => {
            let _ = connection.close(200, "OK".into()).await;
            Err(e)
        }
    }
}

/// A consumer's deliveries, followed by one `Ended` when it stops.
fn consumer_events(consumer: lapin::Consumer) -> BoxStream<'static, ConsumerEvent> {
    let tag = consumer.tag().to_string();
    consumer
        .map(ConsumerEvent::Delivery)
        .chain(stream::once(async move { ConsumerEvent::Ended(tag) }))
        .boxed()
}

impl Shared {
    async fn handle_delivery(self: Arc<Self>, delivery: Delivery, _permit: OwnedSemaphorePermit) {
        let _in_flight = InFlight::enter();
        let Delivery {
            data,
            properties,
            acker,
            redelivered,
            routing_key,
            ..
        } = delivery;
        let arrived = Instant::now();
        match envelope::decode_delivery(&properties, &data, self.opts.max_message_bytes) {
            Ok(request) => {
                // oslo sets a call's AMQP expiration to the caller's timeout.
                let timeout = properties
                    .expiration()
                    .as_ref()
                    .and_then(|ms| ms.as_str().trim().parse::<u64>().ok())
                    .map(Duration::from_millis)
                    .unwrap_or(self.opts.call_timeout);
                let deadline = request.is_call().then(|| arrived + timeout);
                drop(data);
                let span = info_span!(
                    "rpc",
                    request_id = request.context.request_id().unwrap_or("-"),
                    global_request_id = request.context.global_request_id().unwrap_or("-"),
                    method = %request.method,
                    msg_id = request.msg_id.as_deref().unwrap_or("-"),
                );
                self.handle_request(request, acker, redelivered, deadline)
                    .instrument(span)
                    .await;
            }
            Err(e) => {
                warn!(
                    reason = %e.reason, routing_key = %routing_key, bytes = data.len(),
                    msg_id = e.msg_id.as_deref().unwrap_or("-"),
                    "dropping undecodable RPC message"
                );
                drop(data);
                if let Some((msg_id, reply_q)) = e.reply_target() {
                    let failure =
                        RemoteError::value_error(format!("Malformed RPC message: {}", e.reason));
                    self.send_reply(reply_q, msg_id, Err(failure), "<malformed message>")
                        .await;
                }
                ack(&acker).await;
            }
        }
    }

    async fn handle_request(
        &self,
        request: Request,
        acker: Acker,
        redelivered: bool,
        deadline: Option<Instant>,
    ) {
        if let Some(unique_id) = &request.unique_id {
            if !self.remember(unique_id) {
                info!(unique_id = %unique_id, "ignoring duplicate message");
                ack(&acker).await;
                return;
            }
        }
        let is_call = request.is_call();
        let msg_id = request.msg_id.clone().unwrap_or_default();
        let reply_q = request.reply_q.clone().unwrap_or_default();
        if is_call && reply_q.is_empty() {
            warn!("call without _reply_q cannot be answered; dropped");
            ack(&acker).await;
            return;
        }
        if redelivered {
            metrics().redeliveries.inc();
            info!("request was redelivered by the broker (an earlier consumer did not acknowledge it)");
        }
        let journal_id = request.unique_id.as_deref().or(request.msg_id.as_deref());
        let (entry, poisoned) = match self.journal.admit(journal_id) {
            Admission::Handle(entry) => (entry, None),
            Admission::Poison { crashes, entry } => {
                metrics().poison_messages.inc();
                warn!(
                    crashes, method = %request.method, redelivered,
                    "a request that was in flight when the daemon stopped is answered with a \
                     failure instead of being handled again ([nova_scheduler_rs] max_message_crashes)"
                );
                (entry, Some(crashes))
            }
        };
        let heartbeat = if is_call {
            request.heartbeat_interval()
        } else {
            None
        };
        if is_call && heartbeat.is_none() && is_truthy(request.timeout.as_ref()) {
            warn!(timeout = ?request.timeout, "Client provided an invalid timeout value; no call-monitor heartbeats");
        }
        debug!(
            version = %request.version, namespace = ?request.namespace, is_call,
            "dispatching"
        );
        let method = request.method.clone();
        let call = IncomingCall {
            method: request.method,
            namespace: request.namespace,
            version: request.version,
            args: request.args,
            context: request.context,
            is_call,
            deadline,
            redelivered,
        };
        let outcome =
            match self
                .dispatcher
                .resolve(&call.method, call.namespace.as_deref(), &call.version)
            {
                Ok(endpoint) => {
                    let handling = match poisoned {
                        None => endpoint.call(call),
                        // The endpoint may undo what the attempt that died left behind;
                        // if the daemon died doing that too, it is not tried again.
                        Some(crashes) if crashes <= self.opts.max_message_crashes => {
                            endpoint.abandon(call, crashes)
                        }
                        Some(crashes) => Box::pin(std::future::ready(Err(
                            super::dispatcher::poisoned(&call.method, crashes),
                        ))),
                    };
                    let task = tokio::spawn(handling.in_current_span());
                    self.await_handler(task, heartbeat, &msg_id, &reply_q, &method)
                        .await
                }
                Err(e) => Err(e),
            };
        log_outcome(&outcome, is_call);
        if is_call {
            self.send_reply(&reply_q, &msg_id, outcome, &method).await;
        }
        ack(&acker).await;
        self.journal.finish(entry);
    }

    /// Wait for the handler task, sending call-monitor heartbeats every `heartbeat`.
    async fn await_handler(
        &self,
        mut task: tokio::task::JoinHandle<Result<Value, RemoteError>>,
        heartbeat: Option<Duration>,
        msg_id: &str,
        reply_q: &str,
        method: &str,
    ) -> Result<Value, RemoteError> {
        let joined = match heartbeat {
            None => (&mut task).await,
            Some(interval) => {
                let mut ticker =
                    tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                let mut beating = true;
                loop {
                    tokio::select! {
                        joined = &mut task => break joined,
                        _ = ticker.tick(), if beating => {
                            beating = self.send_heartbeat(reply_q, msg_id, interval).await;
                        }
                    }
                }
            }
        };
        match joined {
            Ok(outcome) => outcome,
            Err(e) if e.is_panic() => {
                let payload = e.into_panic();
                let text = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "non-string panic payload".into());
                let text: String = text.chars().take(200).collect();
                error!(panic = %text, "RPC handler panicked");
                Err(RemoteError::runtime_error(format!(
                    "RPC handler for {method} panicked: {text}"
                )))
            }
            Err(_) => Err(RemoteError::runtime_error(format!(
                "RPC handler for {method} was cancelled"
            ))),
        }
    }

    /// One call-monitor heartbeat. `false` stops the heartbeats (as oslo's watchdog does
    /// on any send failure); the call itself continues.
    async fn send_heartbeat(&self, reply_q: &str, msg_id: &str, interval: Duration) -> bool {
        if self.queue_is_gone(reply_q) {
            return false;
        }
        let inner = envelope::reply_message(msg_id, Value::Null, None, false);
        let (body, props) = envelope::encode_reply(&inner, self.compress);
        match self.publisher.publish(reply_q, &body, props).await {
            Ok(Published::Confirmed) => {
                debug!(interval = ?interval, "sent call-monitor heartbeat");
                true
            }
            Ok(other) => {
                debug!(outcome = ?other, reply_q, "call-monitor heartbeat failed; stopping heartbeats");
                false
            }
            Err(e) => {
                debug!(error = %e, "call-monitor heartbeat failed; stopping heartbeats");
                false
            }
        }
    }

    /// The final reply: retried every 0.25 s while the reply queue is missing, up to
    /// `missing_consumer_retry_timeout`; then the queue is remembered as gone for 60 s.
    /// Each kind of trouble is logged once per reply (never its body), then its end.
    async fn send_reply(
        &self,
        reply_q: &str,
        msg_id: &str,
        outcome: Result<Value, RemoteError>,
        method: &str,
    ) {
        if self.queue_is_gone(reply_q) {
            warn!(reply_q, msg_id, "reply queue doesn't exist, drop reply");
            return;
        }
        let (result, failure) = match outcome {
            Ok(v) => (v, None),
            Err(e) => (Value::Null, Some(e.to_failure_string(method))),
        };
        let inner = envelope::reply_message(msg_id, result, failure, true);
        let (body, props) = envelope::encode_reply(&inner, self.compress);
        drop(inner);
        let started = Instant::now();
        let budget = Duration::from_secs(self.opts.missing_consumer_retry_timeout);
        let mut backoff = Backoff::new(&self.opts);
        let mut reported = Reported::default();
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let published = self.publisher.publish(reply_q, &body, props.clone()).await;
            let elapsed = started.elapsed();
            let wait = match published {
                Ok(Published::Confirmed) => {
                    if reported.any() {
                        info!(reply_q, msg_id, attempts, elapsed = ?elapsed, "reply sent after retries");
                    } else {
                        debug!(reply_q, elapsed = ?elapsed, "sent reply");
                    }
                    return;
                }
                Ok(Published::Returned) => {
                    if elapsed >= budget {
                        self.mark_gone(reply_q);
                        error!(
                            reply_q, msg_id, bytes = body.len(), attempts,
                            "The reply failed to send after {} seconds due to a missing queue. Abandoning...",
                            budget.as_secs()
                        );
                        return;
                    }
                    if !std::mem::replace(&mut reported.missing, true) {
                        warn!(
                            reply_q, msg_id, bytes = body.len(),
                            retry_for = ?budget,
                            "reply queue is missing (the caller may have restarted); retrying"
                        );
                    }
                    MISSING_QUEUE_RETRY
                }
                Ok(Published::Nacked) => {
                    if elapsed >= budget {
                        error!(
                            reply_q,
                            msg_id,
                            bytes = body.len(),
                            attempts,
                            "the broker refused the reply (nack); abandoning"
                        );
                        return;
                    }
                    if !std::mem::replace(&mut reported.nacked, true) {
                        warn!(
                            reply_q,
                            msg_id,
                            bytes = body.len(),
                            "the broker refused the reply (nack); retrying"
                        );
                    }
                    MISSING_QUEUE_RETRY
                }
                Err(e) => {
                    if elapsed >= budget {
                        error!(reply_q, msg_id, bytes = body.len(), attempts, error = %e,
                            "could not publish the reply; abandoning");
                        return;
                    }
                    let delay = backoff.next_delay().min(budget.saturating_sub(elapsed));
                    if !std::mem::replace(&mut reported.failed, true) {
                        warn!(reply_q, msg_id, error = %e, retry_in = ?delay, "could not publish the reply; retrying");
                    } else {
                        debug!(error = %e, retry_in = ?delay, "could not publish the reply; retrying");
                    }
                    delay.max(MISSING_QUEUE_RETRY)
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// `true` if the id is new (and remembers it), `false` for a duplicate.
    fn remember(&self, unique_id: &str) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.iter().any(|s| s == unique_id) {
            return false;
        }
        if seen.len() == DEDUPE_WINDOW {
            seen.pop_front();
        }
        seen.push_back(unique_id.to_string());
        true
    }

    fn queue_is_gone(&self, reply_q: &str) -> bool {
        self.gone
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(reply_q)
    }

    fn mark_gone(&self, reply_q: &str) {
        self.gone
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(reply_q);
    }

    /// Stop consuming, drain in-flight deliveries, delete the fanout queue, close.
    async fn shutdown(&self, session: Option<Session>, listener: &Connector) {
        info!("RPC server stopping");
        if let Some(s) = &session {
            for tag in ["1", "2", "3"] {
                if let Err(e) = s
                    .channel
                    .basic_cancel(tag.into(), BasicCancelOptions { nowait: false })
                    .await
                {
                    debug!(tag, error = %e, "basic.cancel failed");
                }
            }
        }
        let all = self.opts.max_concurrent_calls as u32;
        let drained = match self.opts.shutdown_grace {
            Some(grace) => tokio::time::timeout(grace, self.permits.acquire_many(all))
                .await
                .is_ok(),
            None => {
                let _ = self.permits.acquire_many(all).await;
                true
            }
        };
        if drained {
            debug!("no RPC request in flight");
        } else {
            warn!(
                in_flight = all as usize - self.permits.available_permits(),
                "graceful_shutdown_timeout is over; abandoning in-flight requests (unacknowledged, \
                 the broker will hand them out again)"
            );
        }
        self.delete_fanout_queue(session.as_ref(), listener).await;
        if let Some(s) = session {
            let _ = s.channel.close(200, "OK".into()).await;
            let _ = s.connection.close(200, "OK".into()).await;
        }
        self.publisher.close().await;
        info!("RPC server stopped");
    }

    async fn delete_fanout_queue(&self, session: Option<&Session>, listener: &Connector) {
        let queue = self.topology.fanout_queue.as_str();
        if let Some(s) = session.filter(|s| s.channel.status().connected()) {
            match s
                .channel
                .queue_delete(queue.into(), QueueDeleteOptions::default())
                .await
            {
                Ok(_) => {
                    debug!(queue, "deleted fanout queue");
                    return;
                }
                Err(e) => {
                    debug!(queue, error = %e, "fanout queue delete failed on the listener channel")
                }
            }
        }
        // The listener is down: one short attempt on a fresh connection.
        let attempt = async {
            let conn = listener.connect_round().await?;
            let channel = conn
                .create_channel()
                .await
                .map_err(RpcError::amqp("channel.open"))?;
            let deleted = channel
                .queue_delete(queue.into(), QueueDeleteOptions::default())
                .await
                .map_err(RpcError::amqp("queue.delete"));
            let _ = conn.close(200, "OK".into()).await;
            deleted.map(|_| ())
        };
        match tokio::time::timeout(Duration::from_secs(10), attempt).await {
            Ok(Ok(())) => debug!(queue, "deleted fanout queue"),
            Ok(Err(e)) => {
                warn!(queue, error = %e, "could not delete the fanout queue (it expires by x-expires)")
            }
            Err(_) => warn!(
                queue,
                "timed out deleting the fanout queue (it expires by x-expires)"
            ),
        }
    }
}

async fn ack(acker: &Acker) {
    match acker.ack(BasicAckOptions { multiple: false }).await {
        Ok(true) => {}
        Ok(false) => warn!(
            "cannot acknowledge the request: its listener channel is gone; \
             the broker will redeliver it (a duplicate is then ignored by _unique_id)"
        ),
        Err(e) => warn!(
            error = %e,
            "could not acknowledge the request; the broker will redeliver it"
        ),
    }
}

fn log_outcome(outcome: &Result<Value, RemoteError>, is_call: bool) {
    match outcome {
        Ok(_) => debug!(is_call, "request handled"),
        Err(e) if e.module == DISPATCHER_MODULE => {
            warn!(class = %e.class, message = %e.message, is_call, "cannot dispatch request")
        }
        // The endpoint explains each NoValidHost in its own INFO line (oslo.messaging
        // logs an expected exception at debug).
        Err(e) if e.module == NOVA_EXCEPTION_MODULE && e.class == "NoValidHost" => {
            debug!(class = %e.class, message = %e.message, is_call, "request failed")
        }
        Err(e) if e.module == NOVA_EXCEPTION_MODULE => {
            info!(class = %e.class, message = %e.message, is_call, "request failed")
        }
        Err(e) => error!(
            class = %e.class, module = %e.module, message = %e.message, is_call,
            "Exception during message handling"
        ),
    }
}

/// Python truthiness of `_timeout` (only a truthy value starts oslo's watchdog).
fn is_truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    }
}

/// Which troubles of one reply were logged already (each is logged once).
#[derive(Default)]
struct Reported {
    missing: bool,
    nacked: bool,
    failed: bool,
}

impl Reported {
    fn any(&self) -> bool {
        self.missing || self.nacked || self.failed
    }
}

/// Reply queues known to be gone (oslo's `ObsoleteReplyQueuesCache`).
#[derive(Default)]
struct GoneQueues {
    entries: HashMap<String, Instant>,
}

impl GoneQueues {
    fn contains(&mut self, queue: &str) -> bool {
        let now = Instant::now();
        self.entries
            .retain(|_, since| now.duration_since(*since) < GONE_QUEUES_TTL);
        self.entries.contains_key(queue)
    }

    fn insert(&mut self, queue: &str) {
        if self.entries.len() >= GONE_QUEUES_SIZE && !self.entries.contains_key(queue) {
            if let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, since)| **since)
                .map(|(q, _)| q.clone())
            {
                self.entries.remove(&oldest);
            }
        }
        self.entries.insert(queue.to_string(), Instant::now());
    }
}

/// Counts a delivery in `rpc_calls_in_flight` while it is handled.
struct InFlight;

impl InFlight {
    fn enter() -> InFlight {
        metrics().rpc_in_flight.inc();
        InFlight
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        metrics().rpc_in_flight.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn gone_queue_cache_is_bounded() {
        let mut g = GoneQueues::default();
        for i in 0..(GONE_QUEUES_SIZE + 10) {
            g.insert(&format!("reply_{i}"));
        }
        assert_eq!(g.entries.len(), GONE_QUEUES_SIZE);
        assert!(g.contains(&format!("reply_{}", GONE_QUEUES_SIZE + 9)));
    }

    #[test]
    fn truthiness() {
        assert!(!is_truthy(None));
        assert!(!is_truthy(Some(&json!(0))));
        assert!(!is_truthy(Some(&json!(""))));
        assert!(is_truthy(Some(&json!(1))));
        assert!(is_truthy(Some(&json!("x"))));
    }

    #[test]
    fn unusable_options_fail_at_startup() {
        let missing_ca = RpcServerOptions {
            ssl: Some(crate::rpc::TlsOptions {
                ca_file: Some("/nonexistent/ca.pem".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let err = RpcServer::new(missing_ca, vec![]).unwrap_err();
        assert!(matches!(err, RpcError::Tls(_)), "{err}");
        let half_identity = RpcServerOptions {
            ssl: Some(crate::rpc::TlsOptions {
                cert_file: Some("/etc/hostname".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(matches!(
            RpcServer::new(half_identity, vec![]).unwrap_err(),
            RpcError::Tls(_)
        ));
        let no_brokers = RpcServerOptions {
            brokers: vec![],
            ..Default::default()
        };
        assert!(matches!(
            RpcServer::new(no_brokers, vec![]).unwrap_err(),
            RpcError::Config(_)
        ));
    }

    #[tokio::test]
    async fn dedupe_window_is_sixteen() {
        let server = RpcServer::new(RpcServerOptions::default(), vec![]).unwrap();
        let s = &server.shared;
        assert!(s.remember("a"));
        assert!(!s.remember("a"));
        for i in 0..DEDUPE_WINDOW {
            assert!(s.remember(&format!("x{i}")));
        }
        // "a" fell out of the window.
        assert!(s.remember("a"));
    }
}
