// SPDX-License-Identifier: Apache-2.0
//! Wiring and process life: nova.conf → the decision core, the database and
//! Placement edges, the manager endpoint, and the RPC server; SIGTERM/SIGINT stop it.

use crate::config::{Config, DbUrl};
use crate::filters::{build_chain_with, FilterConfig};
use crate::manager::{
    ManagerEndpoint, ManagerOptions, PrefilterOptions, Profile, SchedulerManager,
};
use crate::notifications::{NotificationSink, Notifier, NotifierSettings};
use crate::observe::health::{Health, ReadinessBounds, SystemdNotifier};
use crate::observe::listener;
use crate::placement::index::{IndexLoader, LiveIndex};
use crate::placement::{PlacementClient, PlacementOptions};
use crate::recording::{Recorder, RecorderOptions};
use crate::release::{self, Behaviour, NovaSeries, ReleaseChoice, ResolvedSeries};
use crate::rpc::notifier::AmqpNotificationPublisher;
use crate::rpc::{self, Endpoint, RpcServerOptions, TlsOptions};
use crate::scheduler::Scheduler;
use crate::state::service_row::{self, ServiceRow};
use crate::state::{CacheOptions, HostStateCache, HostStateStore, StateOptions};
use crate::weighers::{build_pipeline_with, WeigherConfig};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tracing::{error, info, warn};

mod db_wait;
pub mod preflight;
mod release_follow;
pub mod shadow;
pub use db_wait::{ConnectError, DbTarget};
pub use preflight::{Prepared, Refusal, RefusalKind, Refused};

/// Why the daemon could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("configuration: {0}")]
    Config(String),
    #[error("database: {0}")]
    State(#[from] crate::state::StateError),
    #[error("placement: {0}")]
    Placement(#[from] crate::placement::PlacementError),
    #[error("service registration: {0}")]
    ServiceRow(#[from] crate::state::service_row::ServiceRowError),
    #[error("messaging: {0}")]
    Rpc(#[from] crate::rpc::RpcError),
    #[error("{0}")]
    Connect(#[from] ConnectError),
}

/// Resolves when the process is asked to stop (SIGTERM or SIGINT).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    info!("shutdown requested");
}

/// The release `[nova_scheduler_rs] nova_release` names; `auto` before the control
/// plane has been read: the newest.
pub fn configured_release(config: &Config) -> NovaSeries {
    match config.nova_scheduler_rs.nova_release {
        ReleaseChoice::Series(series) => series,
        ReleaseChoice::Auto => NovaSeries::NEWEST,
    }
}

/// The release to schedule a cloud as, from the service rows of its databases
/// (`readings`, for `auto`), logged with the reason.
pub fn resolve_release(
    config: &Config,
    readings: &[service_row::DatabaseVersions],
) -> Result<ResolvedSeries, AppError> {
    let control_plane = service_row::choose_version(readings).source.newest();
    let resolved = release::resolve(config.nova_scheduler_rs.nova_release, control_plane)
        .map_err(|e| AppError::Config(e.to_string()))?;
    info!("{resolved}");
    Ok(resolved)
}

/// The decision core as nova.conf configures it, as the configured release
/// ([`configured_release`]).
pub fn build_scheduler(config: &Config) -> Result<Scheduler, AppError> {
    build_scheduler_as(config, configured_release(config))
}

/// The decision core as nova.conf configures it, with `release`'s filters and weighers.
pub fn build_scheduler_as(config: &Config, release: NovaSeries) -> Result<Scheduler, AppError> {
    let fs = &config.filter_scheduler;
    let filter_config = FilterConfig {
        service_down_time: config.default.service_down_time as i64,
        report_interval: config.default.report_interval as i64,
        max_instances_per_host: i64::from(fs.max_instances_per_host),
        max_io_ops_per_host: i64::from(fs.max_io_ops_per_host),
        isolated_images: fs.isolated_images.clone(),
        isolated_hosts: fs.isolated_hosts.clone(),
        restrict_isolated_hosts_to_isolated_images: fs.restrict_isolated_hosts_to_isolated_images,
        image_properties_default_architecture: fs.image_properties_default_architecture.clone(),
        aggregate_image_properties_isolation_namespace: fs
            .aggregate_image_properties_isolation_namespace
            .clone(),
        aggregate_image_properties_isolation_separator: fs
            .aggregate_image_properties_isolation_separator
            .clone(),
        metrics_weight_setting: config.metrics.weight_setting.clone(),
        default_availability_zone: config.default.default_availability_zone.clone(),
        packing_host_numa_cells_allocation_strategy: config
            .compute
            .packing_host_numa_cells_allocation_strategy,
        release,
    };
    // The WebAssembly modules, and the operator's own Python classes (entries of
    // available_filters and weight_classes that are not nova's), loaded as nova loads
    // them even when none is enabled.
    let plugins = crate::plugins::Plugins::load(
        &wasm_options(config),
        &fs.available_filters,
        &fs.weight_classes,
        &python_setup(config),
    )
    .map_err(|e| AppError::Config(e.to_string()))?;
    let filters =
        build_chain_with(&fs.enabled_filters, &filter_config, plugins.filters()).map(|chain| {
            chain.on_filtered(|filter, hosts_in, hosts_out| {
                crate::observe::metrics().filter(filter, hosts_in, hosts_out)
            })
        });
    let weigher_config = WeigherConfig {
        ram_weight_multiplier: fs.ram_weight_multiplier,
        cpu_weight_multiplier: fs.cpu_weight_multiplier,
        disk_weight_multiplier: fs.disk_weight_multiplier,
        io_ops_weight_multiplier: fs.io_ops_weight_multiplier,
        pci_weight_multiplier: fs.pci_weight_multiplier,
        soft_affinity_weight_multiplier: fs.soft_affinity_weight_multiplier,
        soft_anti_affinity_weight_multiplier: fs.soft_anti_affinity_weight_multiplier,
        build_failure_weight_multiplier: fs.build_failure_weight_multiplier,
        cross_cell_move_weight_multiplier: fs.cross_cell_move_weight_multiplier,
        hypervisor_version_weight_multiplier: fs.hypervisor_version_weight_multiplier,
        num_instances_weight_multiplier: fs.num_instances_weight_multiplier,
        image_props_weight_multiplier: fs.image_props_weight_multiplier,
        image_props_weight_setting: fs.image_props_weight_setting.clone(),
        metrics_weight_setting: config.metrics.weight_setting.clone(),
        metrics_weight_multiplier: config.metrics.weight_multiplier,
        metrics_required: config.metrics.required,
        metrics_weight_of_unavailable: config.metrics.weight_of_unavailable,
        release,
    };
    let weighers = build_pipeline_with(&fs.weight_classes, &weigher_config, plugins.weighers());
    // Every bad filter and weigher name in one startup error.
    let (filters, weighers) = match (filters, weighers) {
        (Ok(filters), Ok(weighers)) => (filters, weighers),
        (filters, weighers) => {
            let errors: Vec<String> = [
                filters.err().map(|e| e.to_string()),
                weighers.err().map(|e| e.to_string()),
            ]
            .into_iter()
            .flatten()
            .collect();
            return Err(AppError::Config(errors.join("; ")));
        }
    };
    Ok(Scheduler {
        filters,
        weighers,
        host_subset_size: fs.host_subset_size.max(1) as usize,
        shuffle_best_same_weighed_hosts: fs.shuffle_best_same_weighed_hosts,
        max_attempts: config.scheduler.max_attempts.max(1) as usize,
        packing_host_numa_cells_allocation_strategy: config
            .compute
            .packing_host_numa_cells_allocation_strategy,
    })
}

/// The WebAssembly plugins' options.
fn wasm_options(config: &Config) -> crate::plugins::WasmOptions {
    let o = &config.nova_scheduler_rs;
    crate::plugins::WasmOptions {
        paths: o.wasm_plugins.clone(),
        failure: o.plugin_failure,
        deadline: std::time::Duration::from_secs_f64(o.plugin_deadline_ms / 1e3),
        multipliers: o.plugin_weight_multipliers.clone(),
    }
}

/// Where the embedded Python takes its packages and nova.conf from.
fn python_setup(config: &Config) -> crate::plugins::PythonSetup {
    let (config_files, config_dirs) = config.source_paths();
    crate::plugins::PythonSetup {
        interpreter: config.nova_scheduler_rs.python.clone(),
        config_files,
        config_dirs,
    }
}

fn rpc_options(config: &Config) -> RpcServerOptions {
    rpc_options_for(config, &config.transport)
}

fn rpc_options_for(config: &Config, transport: &crate::config::TransportUrl) -> RpcServerOptions {
    let r = &config.oslo_messaging_rabbit;
    let brokers = transport
        .hosts
        .iter()
        .map(|b| rpc::BrokerAddress {
            host: b.host.clone(),
            port: b.port,
            username: b.username.clone(),
            password: b.password.expose().to_string(),
            virtual_host: b.virtual_host.clone(),
        })
        .collect();
    let ssl = r.ssl.then(|| TlsOptions {
        ca_file: non_empty(&r.ssl_ca_file),
        cert_file: non_empty(&r.ssl_cert_file),
        key_file: non_empty(&r.ssl_key_file),
    });
    RpcServerOptions {
        brokers,
        control_exchange: config.default.control_exchange.clone(),
        topic: "scheduler".into(),
        server: config.default.host.clone(),
        durable_queues: r.amqp_durable_queues || r.rabbit_quorum_queue,
        auto_delete: r.amqp_auto_delete,
        quorum_queue: r.rabbit_quorum_queue,
        transient_quorum_queue: r.rabbit_transient_quorum_queue,
        transient_queues_ttl: r.rabbit_transient_queues_ttl.min(u32::MAX as u64) as u32,
        qos_prefetch_count: r.rabbit_qos_prefetch_count,
        heartbeat_timeout_threshold: r.heartbeat_timeout_threshold.min(u16::MAX as u64) as u16,
        login_method: r.rabbit_login_method.clone(),
        retry_interval: r.rabbit_retry_interval as f64,
        retry_backoff: r.rabbit_retry_backoff as f64,
        interval_max: r.rabbit_interval_max as f64,
        missing_consumer_retry_timeout: r.kombu_missing_consumer_retry_timeout,
        compression: r.kombu_compression.clone(),
        ssl,
        max_concurrent_calls: config.default.executor_thread_pool_size.max(1) as usize,
        rpc_ping_enabled: config.default.rpc_ping_enabled,
        ha_queues: r.rabbit_ha_queues,
        quorum_delivery_limit: r.rabbit_quorum_delivery_limit.max(0) as u32,
        quorum_max_memory_length: r.rabbit_quorum_max_memory_length.max(0) as u32,
        quorum_max_memory_bytes: r.rabbit_quorum_max_memory_bytes.max(0) as u32,
        enable_cancel_on_failover: r.enable_cancel_on_failover,
        max_message_bytes: config.guards.max_message_bytes,
        call_timeout: Duration::from_secs(config.default.long_rpc_timeout.max(1)),
        shutdown_grace: match config.default.graceful_shutdown_timeout {
            0 => None,
            secs => Some(Duration::from_secs(secs)),
        },
        state_dir: Some(config.guards.state_dir.clone()),
        max_message_crashes: config.guards.max_message_crashes,
    }
}

/// nova's two notifiers from `[oslo_messaging_notifications]` and `[notifications]`, with
/// the AMQP publisher when a messaging driver is configured (on the notification
/// transport URL, else `[DEFAULT] transport_url`).
fn notifier(
    config: &Config,
    transport: &crate::config::TransportUrl,
) -> Result<(Notifier, Option<Arc<AmqpNotificationPublisher>>), AppError> {
    let n = &config.oslo_messaging_notifications;
    let (settings, unsupported) = NotifierSettings::new(
        &config.default.host,
        &n.driver,
        &n.topics,
        &config.notifications.notification_format,
        &config.notifications.versioned_notifications_topics,
    );
    for name in unsupported {
        warn!(driver = %name, "[oslo_messaging_notifications] driver is not supported; ignored");
    }
    if !settings.needs_amqp() {
        if settings.is_active() {
            info!(
                ?settings,
                "notifications without a broker (log/noop drivers)"
            );
        }
        return Ok((Notifier::new(settings, None), None));
    }
    let publisher = AmqpNotificationPublisher::start(rpc_options_for(config, transport), n.retry)?;
    info!(
        legacy = ?settings.legacy, versioned = ?settings.versioned,
        "sending scheduler notifications"
    );
    let sink: Arc<dyn NotificationSink> = publisher.clone();
    Ok((Notifier::new(settings, Some(sink)), Some(publisher)))
}

fn non_empty(s: &str) -> Option<std::path::PathBuf> {
    (!s.is_empty()).then(|| s.into())
}

/// Runs the daemon until `shutdown` resolves, from what [`preflight::prepare`] made of
/// `config`.
pub async fn run(
    config: Config,
    prepared: Prepared,
    shutdown: impl Future<Output = ()>,
) -> Result<(), AppError> {
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
    let config = Arc::new(config);
    let Prepared {
        mut scheduler,
        state: state_options,
        placement: placement_options,
        mut prefilters,
        databases,
        placement_index_url,
        notification_transport,
        rpc: rpc_options,
    } = prepared;
    info!(
        filters = ?scheduler.filters.names(), weighers = ?scheduler.weighers.names(),
        "pipeline built"
    );
    // The listener answers from the start: live at once, ready once consuming.
    let health = Health::new(readiness_bounds(&config));
    let mut observers = vec![tokio::spawn(Arc::clone(&health).beat())];
    let explainer = listener::ExplainerSlot::default();
    if let Some(addr) = config.nova_scheduler_rs.http_listen {
        let listener = listener::bind(addr).await.map_err(|e| {
            AppError::Config(format!("[nova_scheduler_rs] http_listen = {addr}: {e}"))
        })?;
        observers.push(tokio::spawn(listener::serve(
            listener,
            Arc::clone(&health),
            Arc::clone(&explainer),
        )));
    }
    let systemd = SystemdNotifier::from_env();
    observers.push(tokio::spawn(systemd.clone().run(Arc::clone(&health))));
    let systemd_status = systemd.clone();
    let mut shutdown = Box::pin(async move {
        shutdown.await;
        systemd.stopping();
    });
    // oslo.db's startup retries, database by database; /readyz says which one is
    // awaited. A stop request while waiting ends the daemon at once.
    for target in databases {
        let waiting = format!("waiting for the database {}", target.what);
        health.starting(waiting.as_str());
        systemd_status.status(&waiting);
        tokio::select! {
            waited = target.wait() => waited?,
            () = &mut shutdown => {
                info!("stopped while {waiting}");
                return Ok(());
            }
        }
    }
    health.started();
    systemd_status.status("databases connected; joining the message bus");
    let main_database_url = state_options.main_database_url.clone();
    let store = Arc::new(HostStateStore::connect(state_options).await?);
    // Our own `services` row (nova-scheduler, topic scheduler) in the main database,
    // heartbeated like nova's DB servicegroup driver, at the control plane's service
    // version so that release's own nova-scheduler can take over again.
    let main_pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(2)
        .connect(&main_database_url)
        .await
        .map_err(|e| AppError::ServiceRow(e.into()))?;
    // The release the cloud is scheduled as (`auto`: its control plane's); the
    // pipeline was built as the configured one, the newest for `auto`.
    let readings = store.newest_service_versions().await;
    let release = resolve_release(&config, &readings)?.series;
    if release != configured_release(&config) {
        scheduler = build_scheduler_as(&config, release)?;
        prefilters = prefilter_options_as(&config, release)?;
        info!(
            filters = ?scheduler.filters.names(), weighers = ?scheduler.weighers.names(),
            "pipeline built as {release}"
        );
    }
    let profile = profile(&config, scheduler, prefilters);
    for warning in release_warnings(&config, release) {
        warn!("{warning}");
    }
    let mut version = service_row::choose_version(&readings);
    info!("{version}");
    if version.version > release.service_version() {
        version.version = release.service_version();
        info!(
            "nova-scheduler service row version {}: {release}'s",
            version.version
        );
    }
    let service_row =
        ServiceRow::register(main_pool.clone(), &config.default.host, version.version).await?;
    let report_interval = Duration::from_secs(config.default.report_interval.max(1));
    let no_service_row_yet = version.source.newest().is_none();
    let heartbeat = tokio::spawn(service_row.clone().heartbeat(report_interval));
    let placement = Arc::new(PlacementClient::new(placement_options)?);
    // A Placement that refuses every request (client certificate, credentials) must
    // not look ready; startup goes on, as a Placement outage is waited out.
    match placement.probe().await {
        Ok(()) => info!("Placement answers"),
        Err(e) => error!(error = %e, "Placement cannot serve this daemon's requests; \
            /readyz says so until it does"),
    }
    health.placement(placement.problem());
    observers.push(tokio::spawn(watch_placement(
        Arc::clone(&placement),
        Arc::clone(&health),
    )));
    let mut manager = SchedulerManager::new(
        profile,
        Arc::clone(&store),
        placement,
        manager_options(&config),
    );
    let recorder = match &config.nova_scheduler_rs.record_calls {
        Some(path) => {
            let recorder = open_recorder(&config, path)?;
            manager = manager.with_recorder(Arc::clone(&recorder));
            Some(recorder)
        }
        None => None,
    };
    let (notifier, notification_publisher) = notifier(&config, &notification_transport)?;
    if notifier.is_active() {
        manager = manager.with_notifier(Arc::new(notifier));
    }
    let (manager, cache, mut background) =
        fast_paths(&config, manager, &store, placement_index_url.as_deref()).await?;
    let manager = Arc::new(manager);
    let follower = Arc::new(release_follow::ReleaseFollower::new(
        Arc::clone(&config),
        Arc::clone(&manager),
        Arc::clone(&store),
        service_row,
        release,
    ));
    if let Some(period) = discover_period(config.scheduler.discover_hosts_in_cells_interval) {
        let follower = Arc::clone(&follower);
        background.push(tokio::spawn(discover_hosts_periodically(
            store,
            main_pool,
            config.default.host.clone(),
            config.default.service_down_time as i64,
            config.default.report_interval as i64,
            period,
            move || follower.scheduling_as(),
        )));
    }
    background.push(tokio::spawn(Arc::clone(&follower).reload_on_sighup(cache)));
    if no_service_row_yet {
        background.push(tokio::spawn(
            follower.await_first_service_rows(report_interval),
        ));
    }
    let _ = explainer.set(Arc::clone(&manager) as Arc<dyn listener::Explainer>);
    // The RPC server appends nova's `baseapi` endpoint (and oslo's ping when enabled).
    let endpoints: Vec<Arc<dyn Endpoint>> = vec![Arc::new(ManagerEndpoint(manager))];
    let served = rpc::run(rpc_options, endpoints, shutdown).await;
    if let Some(publisher) = notification_publisher {
        publisher.close(Duration::from_secs(5)).await;
    }
    heartbeat.abort();
    for task in background.into_iter().chain(observers) {
        task.abort();
    }
    // The recording's last records and gzip trailer, before the process exits.
    if let Some(recorder) = recorder {
        recorder.close();
    }
    served?;
    info!("stopped");
    Ok(())
}

/// A recording of calls at `path`, rotated and bounded as `[nova_scheduler_rs]
/// record_max_bytes` and `record_keep` say.
fn open_recorder(
    config: &Config,
    path: &std::path::Path,
) -> Result<Arc<crate::recording::Recorder>, AppError> {
    let recorder = Recorder::open(RecorderOptions {
        path: path.to_path_buf(),
        max_bytes: config.nova_scheduler_rs.record_max_bytes,
        keep: config.nova_scheduler_rs.record_keep,
        host: config.default.host.clone(),
    })
    .map_err(|e| AppError::Config(format!("recording calls to {}: {e}", path.display())))?;
    info!(path = %path.display(), "recording every select_destinations call and its answer");
    Ok(recorder)
}

/// The manager's options from nova.conf.
fn manager_options(config: &Config) -> ManagerOptions {
    ManagerOptions {
        max_placement_results: config.scheduler.max_placement_results,
        default_availability_zone: config.default.default_availability_zone.clone(),
        rng_seed: None,
        indexed_decision: config.nova_scheduler_rs.indexed_decision,
        read_allocations_ahead: config.nova_scheduler_rs.read_allocations_ahead,
        max_instances_per_request: config.guards.max_instances_per_request,
        decision_ring_size: config.nova_scheduler_rs.decision_ring_size as usize,
    }
}

/// The provider index (`[placement_database] connection`) and the warm host-state
/// cache, as nova.conf turns them on, given to `manager`; with their background
/// tasks (the index's refresher, the cache's passes). The cache is warm on return.
async fn fast_paths(
    config: &Config,
    mut manager: SchedulerManager,
    store: &Arc<HostStateStore>,
    placement_index_url: Option<&str>,
) -> Result<
    (
        SchedulerManager,
        Option<Arc<HostStateCache>>,
        Vec<tokio::task::JoinHandle<()>>,
    ),
    AppError,
> {
    let cache =
        cache_options(config).map(|opts| Arc::new(HostStateCache::new(Arc::clone(store), opts)));
    let mut background = Vec::new();
    if let Some(sqlx_url) = placement_index_url {
        let loader = IndexLoader::connect(sqlx_url)
            .await
            .map_err(|e| AppError::Config(format!("[placement_database] connection: {e}")))?;
        let index = LiveIndex::load(loader)
            .await
            .map_err(|e| AppError::Config(format!("[placement_database]: {e}")))?;
        background.push(index.spawn_refresher(Duration::from_secs_f64(
            config.nova_scheduler_rs.placement_index_refresh_interval,
        )));
        manager = manager.with_placement_index(index);
        info!("placement fast path on: allocation candidates of single-provider requests are computed locally");
    }
    if let Some(cache) = &cache {
        // Warm before consuming: the first answer is served from memory.
        cache.warm().await;
        manager = manager.with_cache(Arc::clone(cache));
        background.push(tokio::spawn(Arc::clone(cache).run(std::future::pending())));
    } else {
        info!("host state cache off ([nova_scheduler_rs] host_state_refresh_interval = 0): cells are read per request");
    }
    Ok((manager, cache, background))
}

/// The databases startup needs, in the order they are used: `[database]`,
/// `[api_database]`, `[placement_database]` (when set), each with its own oslo.db
/// `max_retries` and `retry_interval`.
fn database_targets(config: &Config) -> Result<Vec<DbTarget>, AppError> {
    let mut targets = Vec::new();
    for (group, url, section) in [
        ("database", &config.database_url, &config.database),
        (
            "api_database",
            &config.api_database_url,
            &config.api_database,
        ),
        (
            "placement_database",
            &config.placement_database_url,
            &config.placement_database,
        ),
    ] {
        let Some(url) = url else { continue };
        let sqlx_url = url
            .to_sqlx_url()
            .map_err(|e| AppError::Config(format!("[{group}] connection: {e}")))?;
        targets.push(DbTarget::new(
            url,
            sqlx_url,
            section.max_retries,
            section.retry_interval,
        ));
    }
    Ok(targets)
}

/// How fresh the warm cache and the provider index must be for `/readyz`.
fn readiness_bounds(config: &Config) -> ReadinessBounds {
    let c = &config.nova_scheduler_rs;
    ReadinessBounds {
        cache: cache_options(config).map(|o| ReadinessBounds::for_interval(o.refresh_interval)),
        index: config.placement_database_url.as_ref().map(|_| {
            ReadinessBounds::for_interval(Duration::from_secs_f64(
                c.placement_index_refresh_interval,
            ))
        }),
    }
}

/// `[nova_scheduler_rs]`: the warm cache's settings, or `None` when it is off.
fn cache_options(config: &Config) -> Option<CacheOptions> {
    let c = &config.nova_scheduler_rs;
    (c.host_state_refresh_interval > 0.0).then(|| CacheOptions {
        refresh_interval: Duration::from_secs_f64(c.host_state_refresh_interval),
        full_resync_interval: Duration::from_secs_f64(c.host_state_full_resync_interval),
        deleted_instances_scan_interval: Duration::from_secs_f64(c.deleted_instances_scan_interval),
        retain_consumption: c.retain_virtual_consumption,
        consumption_ttl: Duration::from_secs_f64(c.retained_consumption_ttl),
    })
}

/// `discover_hosts_in_cells_interval`: negative = never; 0 = oslo's default
/// periodic spacing (60 s).
fn discover_period(interval: i64) -> Option<Duration> {
    match interval {
        i if i < 0 => None,
        0 => Some(Duration::from_secs(60)),
        i => Some(Duration::from_secs(i as u64)),
    }
}

/// nova's `_discover_hosts_in_cells`, run immediately and then every `period`, as the
/// release `scheduling_as` says now does it (the leader only, from 2025.1).
async fn discover_hosts_periodically(
    store: Arc<HostStateStore>,
    main: sqlx::MySqlPool,
    our_host: String,
    service_down_time: i64,
    report_interval: i64,
    period: Duration,
    scheduling_as: impl Fn() -> NovaSeries,
) {
    use crate::state::discover::{host_mapping_exists_warning, scheduler_leader, DiscoverError};
    let mut warned_exists = false;
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let release = scheduling_as();
        let leader = match release.has(Behaviour::DiscoverHostsLeaderOnly) {
            true => scheduler_leader(&main, service_down_time, report_interval).await,
            false => Ok(Some(our_host.clone())),
        };
        match leader {
            Ok(Some(leader)) if leader == our_host => {}
            Ok(Some(leader)) => {
                tracing::debug!(
                    "Current leader is {leader}, skipping discover hosts on {our_host}"
                );
                continue;
            }
            Ok(None) => {
                tracing::debug!("no nova-scheduler service is up yet; skipping discover hosts");
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not read nova-scheduler services; skipping discover hosts");
                continue;
            }
        }
        match store.discover_hosts().await {
            Ok(found) if !found.is_empty() => {
                let hosts: Vec<String> = found.iter().map(|(c, h)| format!("{c}:{h}")).collect();
                info!("Discovered {} new hosts: {}", found.len(), hosts.join(","));
            }
            Ok(_) => {}
            Err(e @ DiscoverError::HostMappingExists(_)) => {
                let msg = host_mapping_exists_warning(release).replace("%s", &e.to_string());
                if warned_exists {
                    tracing::debug!("{msg}");
                } else {
                    tracing::warn!("{msg}");
                    warned_exists = true;
                }
            }
            Err(e) => tracing::warn!(error = %e, "discover hosts failed"),
        }
    }
}

/// Options set in nova.conf that `release`'s nova does not have: it ignores them, as
/// nova ignores any option it does not register, and so does this daemon; and those it
/// deprecates for removal, in oslo.config's words.
pub fn release_warnings(config: &Config, release: NovaSeries) -> Vec<String> {
    let mut warnings: Vec<String> = release::DEPRECATED_FOR_REMOVAL
        .iter()
        .filter(|o| release.has(o.since) && config.raw().get(o.group, o.name).is_some())
        .map(|o| o.warning())
        .collect();
    if !release.has(Behaviour::ImagePropertiesWeigher) {
        for option in [
            "image_props_weight_multiplier",
            "image_props_weight_setting",
        ] {
            if config.raw().get("filter_scheduler", option).is_some() {
                warnings.push(format!(
                    "[filter_scheduler] {option} is not an option of {release}; ignored, as \
                     that release's nova-scheduler ignores it"
                ));
            }
        }
    }
    warnings
}

/// What the manager decides as when the cloud is `release`: the pipeline
/// (`scheduler`) and request filters (`prefilters`) built as that release.
pub(crate) fn profile(
    config: &Config,
    scheduler: Scheduler,
    prefilters: PrefilterOptions,
) -> Profile {
    let image_props_weigher = prefilters.release.has(Behaviour::ImagePropertiesWeigher);
    Profile {
        scheduler: Arc::new(scheduler),
        prefilters,
        load_instance_system_metadata: image_props_weigher
            && config.filter_scheduler.image_props_weight_multiplier != 0.0,
    }
}

/// The profile of `release` built from nova.conf.
pub(crate) fn profile_as(config: &Config, release: NovaSeries) -> Result<Profile, AppError> {
    Ok(profile(
        config,
        build_scheduler_as(config, release)?,
        prefilter_options_as(config, release)?,
    ))
}

/// The request filters' options, as the configured release; refuses the ones this
/// daemon cannot honour.
pub(crate) fn prefilter_options(config: &Config) -> Result<PrefilterOptions, AppError> {
    prefilter_options_as(config, configured_release(config))
}

/// The request filters' options, as `release`.
pub(crate) fn prefilter_options_as(
    config: &Config,
    release: NovaSeries,
) -> Result<PrefilterOptions, AppError> {
    let s = &config.scheduler;
    let opts = PrefilterOptions {
        limit_tenants_to_placement_aggregate: s.limit_tenants_to_placement_aggregate,
        placement_aggregate_required_for_tenants: s.placement_aggregate_required_for_tenants,
        query_placement_for_image_type_support: s.query_placement_for_image_type_support,
        enable_isolated_aggregate_filtering: s.enable_isolated_aggregate_filtering,
        image_metadata_prefilter: s.image_metadata_prefilter,
        query_placement_for_routed_network_aggregates: s
            .query_placement_for_routed_network_aggregates,
        disable_fallback_pcpu_query: config.workarounds.disable_fallback_pcpu_query,
        release,
    };
    opts.check().map_err(AppError::Config)?;
    Ok(opts)
}

/// The daemon's [`crate::state::CellUrlResolver`]: fills a `cell_mappings.database_connection`
/// template from `local` (`[database] connection` as written, as nova does), parses the
/// SQLAlchemy URL, logs its [`DbUrl::driver_warnings`] (password masked) and gives the
/// sqlx URL with the TLS arguments mapped. Its errors never hold the password.
pub fn cell_url_resolver(local: String) -> crate::state::CellUrlResolver {
    Arc::new(move |template: &str| {
        let url = crate::config::format_cell_url(template, &local).map_err(|e| e.to_string())?;
        let url = DbUrl::parse(&url)?;
        for warning in url.driver_warnings() {
            tracing::warn!(url = %url, "cell database connection: {warning}");
        }
        url.to_sqlx_url()
    })
}

/// `[database]` / `[api_database]` and the ratio fallbacks, for the state edge.
pub(crate) fn state_options(config: &Config) -> Result<StateOptions, AppError> {
    let api = config.api_database_url.as_ref().ok_or_else(|| {
        AppError::Config("[api_database] connection is required (cells are found there)".into())
    })?;
    let main = config
        .database_url
        .as_ref()
        .ok_or_else(|| AppError::Config("[database] connection is required".into()))?;
    // cell_mappings rows hold SQLAlchemy URLs, possibly templates filled from [database].
    let local = config
        .database
        .connection
        .as_ref()
        .map(|s| s.expose().to_string())
        .unwrap_or_default();
    let resolver = cell_url_resolver(local);
    let sqlx_url = |group: &str, url: &DbUrl| {
        url.to_sqlx_url()
            .map_err(|e| AppError::Config(format!("[{group}] connection: {e}")))
    };
    let d = &config.default;
    let mut opts = StateOptions::new(
        sqlx_url("api_database", api)?,
        sqlx_url("database", main)?,
        resolver,
    );
    opts.cpu_allocation_ratio = d.cpu_allocation_ratio;
    opts.ram_allocation_ratio = d.ram_allocation_ratio;
    opts.disk_allocation_ratio = d.disk_allocation_ratio;
    opts.initial_cpu_allocation_ratio = d.initial_cpu_allocation_ratio;
    opts.initial_ram_allocation_ratio = d.initial_ram_allocation_ratio;
    opts.initial_disk_allocation_ratio = d.initial_disk_allocation_ratio;
    Ok(opts)
}

/// Keeps readiness's view of Placement current: what the requests found, and, while
/// Placement is not serving, a probe every 10 s so readiness recovers without traffic.
async fn watch_placement(placement: Arc<PlacementClient>, health: Arc<Health>) {
    const PROBE_EVERY: Duration = Duration::from_secs(10);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut last_probe = tokio::time::Instant::now();
    loop {
        tick.tick().await;
        if placement.problem().is_some() && last_probe.elapsed() >= PROBE_EVERY {
            last_probe = tokio::time::Instant::now();
            if placement.probe().await.is_ok() {
                info!("Placement answers again");
            }
        }
        health.placement(placement.problem());
    }
}

/// `[placement]` as keystoneauth reads it (see [`PlacementOptions::from_section`]).
pub(crate) fn placement_options(config: &Config) -> Result<PlacementOptions, AppError> {
    Ok(PlacementOptions::from_section(&config.placement)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::PlacementAuth;

    fn options(placement: &str) -> Result<PlacementOptions, AppError> {
        let config = crate::config::from_ini_str(&format!("[placement]\n{placement}"))
            .map_err(|e| AppError::Config(e.to_string()))?;
        placement_options(&config)
    }

    #[test]
    fn cell_urls_get_their_tls_arguments() {
        let resolve = cell_url_resolver(
            "mysql+pymysql://nova:s3cret@db.example/nova?charset=utf8&ssl_ca=/etc/ca.pem".into(),
        );
        // A template takes the TLS arguments of [database] connection with {query}.
        assert_eq!(
            resolve("{scheme}://{username}:{password}@{hostname}/nova_cell1?{query}").unwrap(),
            "mysql://nova:s3cret@db.example:3306/nova_cell1?ssl-mode=VERIFY_IDENTITY&ssl-ca=/etc/ca.pem"
        );
        assert_eq!(
            resolve(
                "mysql+pymysql://c:p@cell2/nova_cell2?ssl_ca=/ca2.pem&ssl_check_hostname=false"
            )
            .unwrap(),
            "mysql://c:p@cell2:3306/nova_cell2?ssl-mode=VERIFY_CA&ssl-ca=/ca2.pem"
        );
        let err =
            resolve("mysql+pymysql://c:s3cret@cell3/nova_cell3?ssl_verify_cert=sure").unwrap_err();
        assert!(
            err.contains("ssl_verify_cert=\"sure\" is not a boolean"),
            "{err}"
        );
        assert!(!err.contains("s3cret"), "{err}");
    }

    #[test]
    fn placement_password_auth_and_catalog_options_as_keystoneauth_reads_them() {
        let o = options(
            "auth_type = password\nauth_url = http://ks:5000/v3\nusername = nova\n\
             password = s3cret\nuser_domain_name = Default\nproject_name = service\n\
             project_domain_name = Default\nregion_name = RegionTwo\n\
             valid_interfaces = admin,internal\nservice_type = placement\n\
             service_name = placement-b\ntimeout = 2.5\ncafile = /etc/ssl/ca.pem\ninsecure = true\n",
        )
        .expect("options");
        let PlacementAuth::Password(p) = &o.auth else {
            panic!("password auth expected: {:?}", o.auth)
        };
        assert_eq!(
            (
                p.auth_url.as_str(),
                p.username.as_deref(),
                p.password.as_str()
            ),
            ("http://ks:5000/v3", Some("nova"), "s3cret")
        );
        assert_eq!(p.project_name.as_deref(), Some("service"));
        assert_eq!(o.endpoint, None, "the endpoint comes from the catalog");
        assert_eq!(o.region_name.as_deref(), Some("RegionTwo"));
        assert_eq!(o.valid_interfaces, vec!["admin", "internal"]);
        assert_eq!(
            (o.service_type.as_str(), o.service_name.as_deref()),
            ("placement", Some("placement-b"))
        );
        assert_eq!(o.timeout, Some(Duration::from_millis(2500)));
        assert_eq!(o.cafile, Some("/etc/ssl/ca.pem".into()));
        assert!(o.insecure);
    }

    #[test]
    fn placement_noauth_admin_token_and_endpoint_override() {
        for auth_type in ["none", "noauth", "NoAuth"] {
            let o = options(&format!(
                "auth_type = {auth_type}\nendpoint_override = http://placement:8778\n"
            ))
            .expect("options");
            assert!(matches!(o.auth, PlacementAuth::None), "{auth_type}");
            assert_eq!(o.endpoint.as_deref(), Some("http://placement:8778"));
        }
        let o = options("auth_type = admin_token\ntoken = t0k\nendpoint = http://p:8778\n")
            .expect("options");
        assert!(matches!(&o.auth, PlacementAuth::AdminToken { token } if token == "t0k"));
        assert_eq!(o.endpoint.as_deref(), Some("http://p:8778"));
        assert!(options("auth_type = admin_token\n").is_err(), "no token");
        assert!(options("auth_type = v2password\n").is_err(), "unsupported");
    }

    #[test]
    fn every_bad_filter_and_weigher_name_is_one_startup_error() {
        let config = crate::config::from_ini_str(
            "[filter_scheduler]\n\
             enabled_filters = ComputeFilter,NoSuchFilter,TrustedFilter,nova.x.OtherFilter\n\
             weight_classes = NoSuchWeigher\n",
        )
        .expect("config");
        let err = match build_scheduler(&config) {
            Err(AppError::Config(e)) => e,
            Err(e) => panic!("not a config error: {e}"),
            Ok(_) => panic!("bad names accepted"),
        };
        for name in [
            "NoSuchFilter",
            "nova.x.OtherFilter",
            "TrustedFilter",
            "NoSuchWeigher",
        ] {
            assert!(err.contains(name), "{name} missing from: {err}");
        }
        let config = crate::config::from_ini_str(
            "[filter_scheduler]\nenabled_filters = ComputeFilter,TypeAffinityFilter\n",
        )
        .expect("config");
        assert!(build_scheduler(&config).is_ok());
    }

    /// From 2026.1 the isolation namespace and separator are deprecated for removal:
    /// set, they are warned of in oslo.config's words; before, nothing is said.
    #[test]
    fn options_a_release_deprecates_are_warned_of_when_set() {
        let config = crate::config::from_ini_str(
            "[filter_scheduler]\naggregate_image_properties_isolation_namespace = ns\n",
        )
        .expect("config");
        assert!(release_warnings(&config, NovaSeries::V2025_2).is_empty());
        let warnings = release_warnings(&config, NovaSeries::V2026_1);
        assert_eq!(
            warnings,
            [
                "Option \"aggregate_image_properties_isolation_namespace\" from group \
              \"filter_scheduler\" is deprecated for removal (\nIt no longer possible to \
              filter on arbitrary image metadata properties. Support\nfor this was removed \
              in 12.0.0 (Liberty). As a result, this option is no longer\nuseful.\n).  Its \
              value may be silently ignored in the future."
            ]
        );
        let unset = crate::config::from_ini_str("").expect("config");
        assert!(release_warnings(&unset, NovaSeries::V2026_2).is_empty());
    }

    /// The image-properties weigher's options on a release without it are named as
    /// ignored; with it, or unset, nothing is said; nova_release picks the pipeline.
    #[test]
    fn an_older_release_names_the_options_it_lacks_and_builds_its_own_pipeline() {
        let config = crate::config::from_ini_str(
            "[filter_scheduler]\nimage_props_weight_multiplier = 2.0\n\
             [nova_scheduler_rs]\nnova_release = 2024.1\n",
        )
        .expect("config");
        assert_eq!(configured_release(&config), NovaSeries::V2024_1);
        let warnings = release_warnings(&config, NovaSeries::V2024_1);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("image_props_weight_multiplier is not an option of nova 29"));
        assert!(release_warnings(&config, NovaSeries::V2025_1).is_empty());
        let scheduler = build_scheduler(&config).expect("scheduler");
        assert!(!scheduler
            .weighers
            .names()
            .contains(&"ImagePropertiesWeigher"));
        let profile = profile_as(&config, NovaSeries::V2024_1).expect("profile");
        assert!(!profile.load_instance_system_metadata);
        assert!(
            profile_as(&config, NovaSeries::V2025_1)
                .expect("profile")
                .load_instance_system_metadata
        );
    }
}
