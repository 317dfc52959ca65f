// SPDX-License-Identifier: Apache-2.0
//! Tests of the whole loader: defaults, files and directories, errors, URLs.

use std::path::{Path, PathBuf};

use super::*;

/// A scratch directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "nova-config-{tag}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn messages(e: &ConfigError) -> Vec<String> {
    e.errors().iter().map(|e| e.to_string()).collect()
}

#[test]
fn defaults_are_novas() {
    let c = from_ini_str("").unwrap();
    assert_eq!(c.default.transport_url.expose(), "rabbit://");
    assert_eq!(c.default.control_exchange, "nova");
    assert!(!c.default.host.is_empty());
    assert_eq!(
        (c.default.rpc_response_timeout, c.default.long_rpc_timeout),
        (60, 1800)
    );
    assert_eq!(c.default.executor_thread_pool_size, 64);
    assert_eq!(
        (c.default.report_interval, c.default.service_down_time),
        (10, 60)
    );
    assert_eq!(c.default.default_availability_zone, "nova");
    assert_eq!(c.default.cpu_allocation_ratio, None);
    assert_eq!(c.default.initial_cpu_allocation_ratio, 4.0);
    assert_eq!(c.default.initial_ram_allocation_ratio, 1.0);
    assert!(!c.default.debug && !c.default.rpc_ping_enabled);
    let r = &c.oslo_messaging_rabbit;
    assert_eq!(r.rabbit_login_method, "AMQPLAIN");
    assert_eq!((r.heartbeat_timeout_threshold, r.heartbeat_rate), (60, 3));
    assert_eq!(r.rabbit_transient_queues_ttl, 1800);
    assert_eq!(
        (
            r.rabbit_retry_interval,
            r.rabbit_retry_backoff,
            r.rabbit_interval_max
        ),
        (1, 2, 30)
    );
    assert_eq!(r.kombu_missing_consumer_retry_timeout, 60);
    assert!(r.direct_mandatory_flag && !r.ssl && !r.amqp_durable_queues);
    assert_eq!(r.kombu_compression, None);
    assert_eq!(
        c.transport.hosts[0].to_string(),
        "amqp://guest:****@localhost:5672/%2F"
    );
    assert_eq!(c.scheduler.max_attempts, 3);
    assert_eq!(c.scheduler.max_placement_results, 1000);
    assert_eq!(c.scheduler.discover_hosts_in_cells_interval, -1);
    assert_eq!(c.scheduler.workers, None);
    let f = &c.filter_scheduler;
    assert_eq!(f.host_subset_size, 1);
    assert_eq!(f.enabled_filters, scheduler::DEFAULT_ENABLED_FILTERS);
    assert_eq!(
        f.available_filters,
        vec!["nova.scheduler.filters.all_filters"]
    );
    assert_eq!(
        f.weight_classes,
        vec!["nova.scheduler.weights.all_weighers"]
    );
    assert_eq!(f.io_ops_weight_multiplier, -1.0);
    assert_eq!(f.build_failure_weight_multiplier, 1e6);
    assert_eq!((f.max_io_ops_per_host, f.max_instances_per_host), (8, 50));
    assert!(f.track_instance_changes && f.restrict_isolated_hosts_to_isolated_images);
    assert_eq!(f.aggregate_image_properties_isolation_separator, ".");
    assert_eq!(c.metrics.weight_of_unavailable, -10000.0);
    assert!(c.metrics.required);
    assert_eq!(c.placement.valid_interfaces, vec!["internal", "public"]);
    assert_eq!(c.placement.service_type, "placement");
    assert!(c.oslo_messaging_notifications.driver.is_empty());
    assert_eq!(c.oslo_messaging_notifications.topics, vec!["notifications"]);
    assert_eq!(c.database.connection, None);
    assert!(c.ignored_options().is_empty());
}

#[test]
fn a_typical_nova_conf() {
    let c = from_ini_str(
        "[DEFAULT]\n\
         transport_url = rabbit://nova:pa%40ss@ctl1:5672,nova:pa%40ss@ctl2:5672/nova\n\
         host = sched-1\ndebug = True\ncpu_allocation_ratio = 16.0\n\
         [api_database]\nconnection = mysql+pymysql://nova:s3cr%2Ft@db/nova_api?charset=utf8\n\
         [filter_scheduler]\nenabled_filters = AvailabilityZoneFilter,\n  ComputeFilter, \n\
         available_filters = nova.scheduler.filters.all_filters\n\
         available_filters = my.Filter\nhost_subset_size = 2\n\
         [oslo_messaging_rabbit]\nrabbit_quorum_queue = yes\nheartbeat_in_pthread = false\n\
         [keystone_authtoken]\nwhatever = 1\n[unknown]\nx = y\n",
    )
    .unwrap();
    assert_eq!(c.default.host, "sched-1");
    assert!(c.default.debug);
    assert_eq!(c.default.cpu_allocation_ratio, Some(16.0));
    assert_eq!(c.transport.hosts.len(), 2);
    assert_eq!(c.transport.hosts[1].password.expose(), "pa@ss");
    assert_eq!(c.transport.virtual_host(), "nova");
    assert_eq!(
        c.filter_scheduler.enabled_filters,
        vec!["AvailabilityZoneFilter", "ComputeFilter"]
    );
    assert_eq!(
        c.filter_scheduler.available_filters,
        vec!["nova.scheduler.filters.all_filters", "my.Filter"]
    );
    assert!(c.oslo_messaging_rabbit.rabbit_quorum_queue);
    assert_eq!(
        c.ignored_options(),
        vec!["[oslo_messaging_rabbit] heartbeat_in_pthread"]
    );
    let api = c.api_database_url.as_ref().unwrap();
    assert_eq!(
        api.to_sqlx_url().unwrap(),
        "mysql://nova:s3cr%2Ft@db:3306/nova_api?ssl-mode=PREFERRED"
    );
    assert_eq!(c.raw().get("unknown", "x").unwrap().value, "y");
    let shown = format!("{c:?}");
    for secret in ["pa@ss", "pa%40ss", "s3cr"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
}

#[test]
fn later_files_override_and_multi_accumulates() {
    let dir = TempDir::new("files");
    let a = dir.write(
        "a.conf",
        "[scheduler]\nmax_attempts = 5\nworkers = 2\n\
         [filter_scheduler]\navailable_filters = a.A\n",
    );
    let b = dir.write(
        "b.conf",
        "[scheduler]\nmax_attempts = 7\n[filter_scheduler]\navailable_filters = b.B\n",
    );
    let c = load(&[a.clone(), b.clone()], &[]).unwrap();
    assert_eq!(c.scheduler.max_attempts, 7);
    assert_eq!(c.scheduler.workers, Some(2));
    assert_eq!(c.filter_scheduler.available_filters, vec!["a.A", "b.B"]);
    assert_eq!(c.files(), vec![a.to_str().unwrap(), b.to_str().unwrap()]);
    let c = load(&[b, a], &[]).unwrap();
    assert_eq!(c.scheduler.max_attempts, 5);
}

#[test]
fn config_dir_is_read_sorted_after_the_files() {
    let dir = TempDir::new("dir");
    let main = dir.write("nova.conf", "[scheduler]\nmax_attempts = 2\nworkers = 1\n");
    dir.write("d/20-b.conf", "[scheduler]\nmax_attempts = 9\n");
    dir.write(
        "d/10-a.conf",
        "[scheduler]\nmax_attempts = 8\nworkers = 4\n",
    );
    dir.write("d/99-z.conf.disabled", "[scheduler]\nmax_attempts = 100\n");
    dir.write("d/.hidden.conf", "[scheduler]\nmax_attempts = 101\n");
    let c = load(&[main], &[dir.path("d")]).unwrap();
    assert_eq!(c.scheduler.max_attempts, 9);
    assert_eq!(c.scheduler.workers, Some(4));
    assert_eq!(c.files().len(), 3);
    // Command-line order decides between files and directories.
    let sources = [
        ConfigSource::Dir(dir.path("d")),
        ConfigSource::File(dir.path("nova.conf")),
    ];
    assert_eq!(load_sources(&sources).unwrap().scheduler.max_attempts, 2);
}

#[test]
fn missing_files_and_dirs_are_errors() {
    let dir = TempDir::new("missing");
    let err = load(&[dir.path("nope.conf")], &[dir.path("nodir")]).unwrap_err();
    let msgs = messages(&err);
    assert_eq!(msgs.len(), 2);
    assert!(
        msgs[0].ends_with("nope.conf: config file not found"),
        "{msgs:?}"
    );
    assert!(
        msgs[1].ends_with("nodir: config directory not found"),
        "{msgs:?}"
    );
    // A missing default directory is fine.
    let optional = ConfigSource::Optional(Box::new(ConfigSource::Dir(dir.path("nodir"))));
    assert!(load_sources(&[optional]).is_ok());
}

#[test]
fn errors_name_file_group_option_value_and_are_all_collected() {
    let dir = TempDir::new("errors");
    let path = dir.write(
        "nova.conf",
        "[scheduler]\nmax_attempts = zero\nmax_placement_results = 0\n\
         [filter_scheduler]\nram_weight_multiplier = heavy\npci_weight_multiplier = -1\n\
         shuffle_best_same_weighed_hosts = perhaps\n\
         image_properties_default_architecture = x86\n\
         [DEFAULT]\ntransport_url = rabbit://nova:TopSecret@h:port/\n\
         [database]\nconnection = postgresql://nova:DbSecret@db/nova\n\
         [oslo_messaging_rabbit]\nrabbit_login_method = plain\n",
    );
    let err = load(std::slice::from_ref(&path), &[]).unwrap_err();
    let file = path.display().to_string();
    let msgs = messages(&err);
    assert_eq!(msgs.len(), 9, "{msgs:#?}");
    assert!(msgs.contains(&format!(
        "{file}:2: [scheduler] max_attempts = \"zero\": not an integer"
    )));
    assert!(msgs.contains(&format!(
        "{file}:3: [scheduler] max_placement_results = \"0\": should be greater than or equal to 1"
    )));
    assert!(msgs.contains(&format!(
        "{file}:5: [filter_scheduler] ram_weight_multiplier = \"heavy\": not a number"
    )));
    assert!(msgs.contains(&format!(
        "{file}:6: [filter_scheduler] pci_weight_multiplier = \"-1\": should be greater than or equal to 0"
    )));
    assert!(msgs.contains(&format!(
        "{file}:10: [DEFAULT] transport_url = \"rabbit://nova:****@h:port/\": invalid port"
    )));
    assert!(msgs
        .iter()
        .any(|m| m.contains("[database] connection = \"postgresql://nova:****@db/nova\"")));
    assert!(msgs
        .iter()
        .any(|m| m.contains("rabbit_login_method = \"plain\": valid values are [PLAIN")));
    let all = format!("{err} {err:?}");
    assert!(
        !all.contains("TopSecret") && !all.contains("DbSecret"),
        "{all}"
    );
    assert!(all.starts_with("9 configuration errors:\n  - "));
}

#[test]
fn syntax_errors_are_reported_with_value_errors() {
    let err = from_ini_str("[scheduler]\nmax_attempts = x\n[broken\n").unwrap_err();
    let msgs = messages(&err);
    assert_eq!(msgs, vec!["<string>:3: Invalid section (must end with ])"]);
    let err = from_ini_str("  indented\n[scheduler]\nmax_attempts = 0\n").unwrap_err();
    assert_eq!(
        messages(&err).len(),
        1,
        "a file with a syntax error is not used"
    );
}

#[test]
fn secrets_are_masked_in_value_errors() {
    let err = from_ini_str("[placement]\npassword = $secret_ref\ntoken = ${x}\n").unwrap_err();
    let msgs = messages(&err);
    assert_eq!(msgs.len(), 2);
    assert!(
        msgs.iter()
            .all(|m| m.contains("= \"****\": template substitution")),
        "{msgs:?}"
    );
    let ok = from_ini_str("[placement]\npassword = pa$$word\n").unwrap();
    assert_eq!(ok.placement.password.unwrap().expose(), "pa$word");
}

#[test]
fn transport_query_overrides_rabbit_options() {
    let c = from_ini_str(
        "[DEFAULT]\ntransport_url = rabbit://u:p@h:5671/?ssl=1&rabbit_qos_prefetch_count=10\n\
         [oslo_messaging_rabbit]\nssl = false\nrabbit_qos_prefetch_count = 2\nheartbeat_rate = 4\n",
    )
    .unwrap();
    assert!(c.oslo_messaging_rabbit.ssl);
    assert_eq!(c.oslo_messaging_rabbit.rabbit_qos_prefetch_count, 10);
    assert_eq!(c.oslo_messaging_rabbit.heartbeat_rate, 4);
    assert_eq!(c.transport.hosts[0].port, 5671);

    let err = from_ini_str(
        "[DEFAULT]\ntransport_url = rabbit://u:Secret1@h/?control_exchange=x&ssl=maybe\n",
    )
    .unwrap_err();
    let msgs = messages(&err);
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert!(msgs[0]
        .contains("query parameter \"control_exchange\" is not an [oslo_messaging_rabbit] option"));
    assert_eq!(
        msgs[1],
        "[DEFAULT] transport_url query: [oslo_messaging_rabbit] ssl = \"maybe\": not a boolean (true/false, yes/no, on/off, 1/0)"
    );
    assert!(!format!("{err:?}").contains("Secret1"));
}

#[test]
fn rabbit_cross_checks_and_deprecated_name() {
    let err = from_ini_str(
        "[oslo_messaging_rabbit]\nrabbit_quorum_queue = true\nrabbit_ha_queues = true\n\
         rpc_conn_pool_size = 1\nrabbit_stream_fanout = true\n",
    )
    .unwrap_err();
    assert_eq!(messages(&err).len(), 4, "{:?}", messages(&err));
    let c = from_ini_str("[oslo_messaging_rabbit]\nkombu_reconnect_timeout = 90\n").unwrap();
    assert_eq!(
        c.oslo_messaging_rabbit.kombu_missing_consumer_retry_timeout,
        90
    );
    assert!(c.ignored_options().is_empty());
}

#[test]
fn environment_overrides_files() {
    let mut raw = RawConfig::new();
    raw.add_str(
        "n.conf",
        "[scheduler]\nmax_attempts = 5\n[DEFAULT]\nhost = a\n",
    )
    .unwrap();
    raw.set_env([
        ("OS_SCHEDULER__MAX_ATTEMPTS".to_string(), "7".to_string()),
        (
            "OS_FILTER_SCHEDULER__AVAILABLE_FILTERS".to_string(),
            "x.Y".to_string(),
        ),
        (
            "OS_DEFAULT__TRANSPORT_URL".to_string(),
            "rabbit://u:p@$host/".to_string(),
        ),
        ("PATH".to_string(), "/bin".to_string()),
    ]);
    let c = Config::from_raw(raw.clone(), Vec::new()).unwrap();
    assert_eq!(c.scheduler.max_attempts, 7);
    assert_eq!(c.filter_scheduler.available_filters, vec!["x.Y"]);
    assert_eq!(c.transport.hosts[0].host, "a");
    raw.set_env([("OS_SCHEDULER__WORKERS".to_string(), "many".to_string())]);
    let err = Config::from_raw(raw, Vec::new()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "environment OS_SCHEDULER__WORKERS: [scheduler] workers = \"many\": not an integer"
    );
}

#[test]
fn empty_values() {
    // Empty numbers mean "unset" in oslo: the default stays. Empty strings are values.
    let c = from_ini_str(
        "[scheduler]\nmax_attempts =\nworkers =\n[filter_scheduler]\nenabled_filters =\n\
         [DEFAULT]\ndefault_availability_zone =\n",
    )
    .unwrap();
    assert_eq!(c.scheduler.max_attempts, 3);
    assert_eq!(c.scheduler.workers, None);
    assert!(c.filter_scheduler.enabled_filters.is_empty());
    assert_eq!(c.default.default_availability_zone, "");
    assert!(from_ini_str("[filter_scheduler]\ntrack_instance_changes =\n").is_err());
}

#[test]
fn cli_debug_override_and_explicit_files() {
    let dir = TempDir::new("cli");
    let f = dir.write("n.conf", "[DEFAULT]\ndebug = false\n");
    let args = ["--config-file", f.to_str().unwrap(), "--debug"];
    let cli = parse_cli_args(args.iter().map(|s| s.to_string())).unwrap();
    let c = load_from_cli(&cli).unwrap();
    assert!(c.default.debug);
}

#[test]
fn sqlalchemy_url_variants() {
    let u = DbUrl::parse("mysql+pymysql://nova:pass@db.example:3307/nova?charset=utf8&plugin=x")
        .unwrap();
    assert_eq!(u.backend(), "mysql");
    assert_eq!(
        u.to_sqlx_url().unwrap(),
        "mysql://nova:pass@db.example:3307/nova?ssl-mode=PREFERRED"
    );
    assert_eq!(u.unmapped_params(), vec!["plugin"]);
    assert_eq!(
        u.to_string(),
        "mysql+pymysql://nova:****@db.example:3307/nova?charset=utf8&plugin=x"
    );

    let u = DbUrl::parse("mysql://root@localhost/nova").unwrap();
    assert_eq!(u.password, None);
    assert_eq!(
        u.to_sqlx_url().unwrap(),
        "mysql://root@localhost:3306/nova?ssl-mode=PREFERRED"
    );

    let u = DbUrl::parse("mariadb+pymysql://nova:p%40ss%3Aw%2F@[fd00::5]/nova_cell1").unwrap();
    assert_eq!(u.password.as_ref().unwrap().expose(), "p@ss:w/");
    assert_eq!(u.host.as_deref(), Some("fd00::5"));
    assert_eq!(
        u.to_sqlx_url().unwrap(),
        "mysql://nova:p%40ss%3Aw%2F@[fd00::5]:3306/nova_cell1?ssl-mode=PREFERRED"
    );

    let u = DbUrl::parse("mysql+mysqldb://nova:x@/nova?unix_socket=/var/run/mysqld/mysqld.sock")
        .unwrap();
    assert_eq!(u.host, None);
    assert_eq!(
        u.to_sqlx_url().unwrap(),
        "mysql://nova:x@localhost:3306/nova?ssl-mode=PREFERRED&socket=/var/run/mysqld/mysqld.sock"
    );

    let u = DbUrl::parse(
        "mysql+pymysql://n:p@db/nova?ssl_ca=/etc/ca.pem&ssl_cert=/c.pem&ssl_key=/k.pem",
    )
    .unwrap();
    assert_eq!(
        u.to_sqlx_url().unwrap(),
        "mysql://n:p@db:3306/nova?ssl-mode=VERIFY_IDENTITY&ssl-ca=/etc/ca.pem&ssl-cert=/c.pem&ssl-key=/k.pem"
    );
    let u =
        DbUrl::parse("mysql+pymysql://n:p@db/nova?ssl_ca=/ca&ssl_check_hostname=false").unwrap();
    assert!(u.to_sqlx_url().unwrap().contains("ssl-mode=VERIFY_CA"));
    let u = DbUrl::parse("mysql://n:p@db/nova?ssl_mode=required").unwrap();
    assert!(u.to_sqlx_url().unwrap().contains("ssl-mode=REQUIRED"));

    // SQLAlchemy's password runs to the first `@`; `/` and `?` in it survive.
    let u = DbUrl::parse("mysql://u:pa/ss?@h/db").unwrap();
    assert_eq!(u.password.unwrap().expose(), "pa/ss?");
    assert_eq!(
        (u.host.as_deref(), u.database.as_deref()),
        (Some("h"), Some("db"))
    );
    assert!(DbUrl::parse("mysql://h:port/db").is_err());
    assert!(DbUrl::parse("not a url").is_err());
    assert!(!format!("{:?}", DbUrl::parse("mysql://u:hunter2@h/db").unwrap()).contains("hunter2"));
}

/// The TLS mode each combination of TLS arguments gets. Grouped by what PyMySQL 1.2.4
/// does with the URL through SQLAlchemy 2.1 (its `verify_mode` and `check_hostname`),
/// except where SQLAlchemy hands PyMySQL a string for a boolean: `ssl_verify_identity`
/// and `ssl_disabled` are any non-empty string there (so `ssl_verify_identity=false`
/// verifies and `ssl_disabled=false` disables TLS), and a verification flag makes PyMySQL
/// drop `ssl_ca` and the host name check for the system CA store. Here booleans are
/// booleans and a verification the URL asks for is kept.
#[test]
fn tls_arguments_give_pymysql_modes() {
    use super::db_url::SslMode::*;
    let cases = [
        // No TLS argument: PyMySQL tries TLS without verification (PREFERRED).
        ("", Preferred),
        ("charset=utf8", Preferred),
        // CERT_REQUIRED, check_hostname=True.
        ("ssl_ca=/ca.pem", VerifyIdentity),
        (
            "ssl_ca=/ca.pem&ssl_cert=/c.pem&ssl_key=/k.pem",
            VerifyIdentity,
        ),
        ("ssl_ca=/ca.pem&ssl_check_hostname=true", VerifyIdentity),
        ("ssl_ca=/ca.pem&ssl_verify_identity=true", VerifyIdentity),
        ("ssl_verify_identity=true", VerifyIdentity),
        (
            "ssl_ca=/ca.pem&ssl_verify_cert=true&ssl_check_hostname=true",
            VerifyIdentity,
        ),
        (
            "ssl_verify_cert=false&ssl_verify_identity=yes",
            VerifyIdentity,
        ),
        // CERT_REQUIRED, no host name check.
        ("ssl_ca=/ca.pem&ssl_check_hostname=false", VerifyCa),
        ("ssl_ca=/ca.pem&ssl_verify_cert=true", VerifyCa),
        ("ssl_verify_cert=true", VerifyCa),
        ("ssl_verify_cert=1&ssl_verify_identity=0", VerifyCa),
        // TLS required, CERT_NONE.
        ("ssl_ca=/ca.pem&ssl_verify_cert=false", Required),
        ("ssl_verify_cert=false", Required),
        ("ssl_cert=/c.pem&ssl_key=/k.pem", Required),
        ("ssl_key=/k.pem", Required),
        ("ssl_check_hostname=true", Required),
        ("ssl_check_hostname=off", Required),
        ("ssl_verify_identity=false", Required),
        // PyMySQL's ssl_disabled, mysqlclient's ssl_mode.
        ("ssl_disabled=true&ssl_ca=/ca.pem", Disabled),
        ("ssl_disabled=false", Preferred),
        ("ssl_disabled=false&ssl_ca=/ca.pem", VerifyIdentity),
        ("ssl_mode=DISABLED&ssl_ca=/ca.pem", Disabled),
        ("ssl_mode=preferred", Preferred),
        ("ssl_mode=Required", Required),
        ("ssl_mode=VERIFY_CA&ssl_ca=/ca.pem", VerifyCa),
        ("ssl_mode=verify_identity", VerifyIdentity),
        (
            "ssl_mode=REQUIRED&ssl_ca=/ca.pem&ssl_check_hostname=true",
            Required,
        ),
        ("ssl_mode=DISABLED&ssl_disabled=true", Disabled),
    ];
    for (query, mode) in cases {
        let url = DbUrl::parse(&format!("mysql+pymysql://n:p@db/nova?{query}")).unwrap();
        let tls = url.tls().unwrap_or_else(|e| panic!("{query}: {e}"));
        assert_eq!(tls.mode, mode, "{query}");
        let sqlx_url = url.to_sqlx_url().unwrap();
        assert!(
            sqlx_url.contains(&format!("?ssl-mode={}", mode.as_str())),
            "{query}: {sqlx_url}"
        );
    }
}

#[test]
fn tls_files_reach_sqlx() {
    use sqlx::mysql::{MySqlConnectOptions, MySqlSslMode};
    use sqlx::ConnectOptions;
    use std::str::FromStr;
    let url = DbUrl::parse(
        "mysql+pymysql://nova:s%40cret@db.example:3307/nova?charset=utf8\
         &ssl_ca=/etc/nova/db%20ca.pem&ssl_cert=/etc/nova/client.pem&ssl_key=/etc/nova/client.key",
    )
    .unwrap();
    let tls = url.tls().unwrap();
    assert_eq!(tls.ca.as_deref(), Some("/etc/nova/db ca.pem"));
    assert_eq!(tls.cert.as_deref(), Some("/etc/nova/client.pem"));
    assert_eq!(tls.key.as_deref(), Some("/etc/nova/client.key"));
    assert!(tls.notes.is_empty(), "{:?}", tls.notes);
    let sqlx_url = url.to_sqlx_url().unwrap();
    assert_eq!(
        sqlx_url,
        "mysql://nova:s%40cret@db.example:3307/nova?ssl-mode=VERIFY_IDENTITY\
         &ssl-ca=/etc/nova/db%20ca.pem&ssl-cert=/etc/nova/client.pem&ssl-key=/etc/nova/client.key"
    );
    // sqlx reads them back as its ssl_mode, ssl_ca, ssl_client_cert and ssl_client_key.
    let opts = MySqlConnectOptions::from_str(&sqlx_url).unwrap();
    assert!(matches!(opts.get_ssl_mode(), MySqlSslMode::VerifyIdentity));
    assert_eq!(opts.get_host(), "db.example");
    assert_eq!(opts.get_port(), 3307);
    let back = opts.to_url_lossy().to_string();
    for part in [
        "ssl-ca=file%3A+%2Fetc%2Fnova%2Fdb+ca.pem",
        "ssl-cert=file%3A+%2Fetc%2Fnova%2Fclient.pem",
        "ssl-key=file%3A+%2Fetc%2Fnova%2Fclient.key",
    ] {
        assert!(back.contains(part), "{part} in {back}");
    }
    for (mode, sqlx_mode) in [
        ("DISABLED", MySqlSslMode::Disabled),
        ("PREFERRED", MySqlSslMode::Preferred),
        ("REQUIRED", MySqlSslMode::Required),
        ("VERIFY_CA", MySqlSslMode::VerifyCa),
        ("VERIFY_IDENTITY", MySqlSslMode::VerifyIdentity),
    ] {
        let url = DbUrl::parse(&format!("mysql://u@h/d?ssl_mode={mode}")).unwrap();
        let opts = MySqlConnectOptions::from_str(&url.to_sqlx_url().unwrap()).unwrap();
        assert_eq!(
            std::mem::discriminant(&opts.get_ssl_mode()),
            std::mem::discriminant(&sqlx_mode),
            "{mode}"
        );
    }

    // A client certificate without a key file: the key is read from the certificate file.
    let url = DbUrl::parse("mysql+pymysql://u@h/d?ssl_cert=/etc/nova/both.pem").unwrap();
    let tls = url.tls().unwrap();
    assert_eq!(tls.mode, super::db_url::SslMode::Required);
    assert_eq!(tls.key.as_deref(), Some("/etc/nova/both.pem"));
    // No TLS: no files are passed, even if named.
    let url = DbUrl::parse("mysql+pymysql://u@h/d?ssl_disabled=1&ssl_ca=/ca.pem").unwrap();
    assert_eq!(
        url.to_sqlx_url().unwrap(),
        "mysql://u@h:3306/d?ssl-mode=DISABLED"
    );
    // The unix socket and TLS together.
    let url = DbUrl::parse("mysql+pymysql://u@/d?unix_socket=/run/my.sock&ssl_ca=/ca.pem").unwrap();
    assert_eq!(
        url.to_sqlx_url().unwrap(),
        "mysql://u@localhost:3306/d?ssl-mode=VERIFY_IDENTITY&ssl-ca=/ca.pem&socket=/run/my.sock"
    );
}

#[test]
fn bad_tls_arguments_are_errors() {
    let cases = [
        (
            "ssl_verify_cert=maybe",
            "ssl_verify_cert=\"maybe\" is not a boolean",
        ),
        (
            "ssl_verify_identity=2",
            "ssl_verify_identity=\"2\" is not a boolean",
        ),
        (
            "ssl_check_hostname=yess",
            "ssl_check_hostname=\"yess\" is not a boolean",
        ),
        (
            "ssl_disabled=nope",
            "ssl_disabled=\"nope\" is not a boolean",
        ),
        (
            "ssl_mode=VERIFY",
            "ssl_mode=\"VERIFY\" is not one of DISABLED, PREFERRED, REQUIRED",
        ),
        (
            "ssl_mode=REQUIRED&ssl_disabled=true",
            "ssl_disabled=true contradicts ssl_mode=REQUIRED",
        ),
        ("ssl_capath=/etc/ssl/certs", "ssl_capath is not supported"),
        (
            "ssl_ca=/ca.pem&ssl_key_password=hunter2",
            "ssl_key_password is not supported",
        ),
    ];
    for (query, expected) in cases {
        let url = DbUrl::parse(&format!("mysql+pymysql://nova:s3cret@db/nova?{query}")).unwrap();
        let err = url.tls().expect_err(query);
        assert!(err.contains(expected), "{query}: {err}");
        assert_eq!(url.to_sqlx_url().unwrap_err(), err);
        assert!(!err.contains("s3cret") && !err.contains("hunter2"), "{err}");
        assert!(url.driver_warnings().iter().all(|w| !w.contains("s3cret")));
    }
    // In nova.conf: a startup error naming the option, the password masked.
    let err = from_ini_str(
        "[api_database]\nconnection = mysql+pymysql://nova:s3cret@db/nova_api?ssl_verify_cert=sure\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("[api_database] connection"), "{err}");
    assert!(
        err.contains("ssl_verify_cert=\"sure\" is not a boolean"),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
    let err = from_ini_str(
        "[database]\nconnection = mysql+pymysql://nova:s3cret@db/nova\n\
         connection_parameters = ssl_capath=/etc/ssl/certs\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("ssl_capath is not supported"), "{err}");
}

#[test]
fn tls_caveats_are_warnings() {
    let warnings = |query: &str| {
        DbUrl::parse(&format!("mysql+pymysql://n:p@db/nova?{query}"))
            .unwrap()
            .driver_warnings()
    };
    assert!(warnings("ssl_ca=/ca.pem&charset=utf8").is_empty());
    assert!(warnings("ssl_cert=/c.pem&ssl_key=/k.pem").is_empty());
    assert!(warnings("").is_empty());
    let expect_one = |query: &str, text: &str| {
        let w = warnings(query);
        assert_eq!(w.len(), 1, "{query}: {w:?}");
        assert!(w[0].contains(text), "{query}: {w:?}");
    };
    expect_one(
        "ssl_ca=/ca.pem&ssl_check_hostname=false",
        "VERIFY_CA: the host name is not checked",
    );
    expect_one("ssl_verify_cert=true", "without ssl_ca");
    expect_one("ssl_mode=VERIFY_IDENTITY", "without ssl_ca");
    expect_one("ssl_key=/k.pem", "ssl_key without ssl_cert");
    expect_one(
        "ssl_check_hostname=true",
        "ssl_check_hostname=true has no effect",
    );
    expect_one(
        "ssl_mode=REQUIRED&ssl_verify_cert=true",
        "ssl_verify_cert not used",
    );
    expect_one(
        "ssl_cert=/c.pem&ssl_key=/k.pem&ssl_cipher=AES256-SHA",
        "ssl_cipher is not honoured",
    );
    expect_one(
        "ssl_ca=/ca.pem&compress=true",
        "parameter \"compress\" is not passed",
    );
    // Config::warnings names the section.
    let c = from_ini_str(
        "[placement_database]\nconnection = mysql+pymysql://p:p@db/placement?ssl_verify_cert=true\n",
    )
    .unwrap();
    let w = c.warnings();
    assert!(
        w.iter()
            .any(|w| w
                .starts_with("[placement_database] connection: ssl-mode VERIFY_CA without ssl_ca")),
        "{w:?}"
    );
}

#[test]
fn connection_parameters_are_appended() {
    let c = from_ini_str(
        "[database]\nconnection = mysql+pymysql://n:p@db/nova\nconnection_parameters = ssl_ca=/ca.pem\n",
    )
    .unwrap();
    let url = c.database_url.unwrap();
    assert!(url
        .to_sqlx_url()
        .unwrap()
        .ends_with("?ssl-mode=VERIFY_IDENTITY&ssl-ca=/ca.pem"));
}

#[test]
fn cell_url_templates() {
    let local = "mysql+pymysql://nova:s3cret@DB.example:3306/nova?charset=utf8";
    assert_eq!(
        format_cell_url(
            "{scheme}://{username}:{password}@{hostname}:{port}/nova_cell1?{query}",
            local
        )
        .unwrap(),
        "mysql+pymysql://nova:s3cret@db.example:3306/nova_cell1?charset=utf8"
    );
    assert_eq!(
        format_cell_url("{path}|{fragment}", local).unwrap(),
        "nova|"
    );
    assert_eq!(
        format_cell_url("{{literal}} {hostname}", "mysql://h/x").unwrap(),
        "{literal} h"
    );
    // No port, no password: Python's str.format prints None.
    assert_eq!(
        format_cell_url("{port} {password}", "mysql://u@h/x").unwrap(),
        "None None"
    );
    // A URL without placeholders is used as is.
    assert_eq!(
        format_cell_url("mysql://a:b@c/d", local).unwrap(),
        "mysql://a:b@c/d"
    );
    let multi = "rabbit://u1:p1@h1:5672,u2:p2@h2:5673/";
    assert_eq!(
        format_cell_url(
            "{username1}@{hostname1}:{port1},{username2}@{hostname2}:{port2}",
            multi
        )
        .unwrap(),
        "u1@h1:5672,u2@h2:5673"
    );
    let err = format_cell_url("{nope}", local).unwrap_err().to_string();
    assert!(
        err.contains("unknown placeholder {nope}") && !err.contains("s3cret"),
        "{err}"
    );
    assert!(format_cell_url("{hostname", local).is_err());
    assert!(format_cell_url("}", local).is_err());
    assert!(format_cell_url("{port}", "mysql://u:p@h:x/d").is_err());
}

#[test]
fn sample_config_parses() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/nova.conf.sample");
    let text = std::fs::read_to_string(&path).unwrap();
    let c = from_ini_str(&text).unwrap();
    // The sample only has comments: every value is the default.
    assert_eq!(c.scheduler.max_attempts, 3);
    assert!(c.raw().groups().contains(&"filter_scheduler".to_string()));
}

#[test]
fn pci_alias_is_multi_valued_with_its_old_name() {
    let c = from_ini_str(
        "[pci]\nalias = {\"name\": \"a\", \"vendor_id\": \"8086\", \"product_id\": \"0001\"}\n\
         alias = {\"name\": \"b\", \"vendor_id\": \"8086\", \"product_id\": \"0002\"}\n",
    )
    .unwrap();
    assert_eq!(c.pci.alias.len(), 2);
    assert!(c.pci.alias[1].contains("\"b\""));
    let old = from_ini_str("[DEFAULT]\npci_alias = {\"name\": \"x\"}\n").unwrap();
    assert_eq!(old.pci.alias, vec!["{\"name\": \"x\"}"]);
    assert!(from_ini_str("").unwrap().pci.alias.is_empty());
}

#[test]
fn options_nova_acts_on_and_the_daemon_does_not_are_named_at_startup() {
    let c = from_ini_str(
        "[DEFAULT]\nlog_config_append = /etc/nova/logging.conf\nmax_logfile_count = 3\n\
         periodic_enable = false\n[database]\nmax_pool_size = 50\n",
    )
    .unwrap();
    let warnings = c.not_honoured();
    assert_eq!(warnings.len(), 4, "{warnings:#?}");
    for option in [
        "[DEFAULT] log_config_append",
        "[DEFAULT] max_logfile_count",
        "[DEFAULT] periodic_enable = false",
        "[database] max_pool_size",
    ] {
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with(&format!("option {option} is accepted but not honoured"))),
            "{option}: {warnings:#?}"
        );
    }
    assert!(c
        .warnings()
        .iter()
        .any(|w| w.contains("[DEFAULT] log_config_append")));
    assert!(from_ini_str("[DEFAULT]\nperiodic_enable = true\n")
        .unwrap()
        .not_honoured()
        .is_empty());
}

#[test]
fn oslo_log_options_are_honoured_not_warned_about() {
    let c = from_ini_str(
        "[DEFAULT]\nlog_file = nova-scheduler.log\nlog_dir = /var/log/nova\nuse_json = true\n\
         use_journal = true\nuse_syslog = true\nsyslog_log_facility = LOG_LOCAL0\n\
         log_date_format = %H:%M:%S\ndefault_log_levels = amqp=WARN\nwatch_log_file = true\n\
         use_stderr = true\n",
    )
    .unwrap();
    assert!(c.not_honoured().is_empty(), "{:#?}", c.not_honoured());
    assert!(c.log.use_json && c.log.use_journal && c.log.use_syslog && c.log.use_stderr);
    assert_eq!(c.log.facility(), 16);
    assert_eq!(
        c.log.log_path("nova-scheduler"),
        Some(std::path::PathBuf::from("/var/log/nova/nova-scheduler.log"))
    );
    assert_eq!(c.log.default_log_levels, vec!["amqp=WARN"]);
}

#[test]
fn servicegroup_driver_mc_stops_startup_with_the_reason() {
    let err = from_ini_str("[DEFAULT]\nservicegroup_driver = mc\n").unwrap_err();
    let msgs = messages(&err);
    assert_eq!(msgs.len(), 1, "{msgs:#?}");
    assert!(
        msgs[0]
            .starts_with("[DEFAULT] servicegroup_driver: mc keeps service liveness in memcached"),
        "{msgs:#?}"
    );
    assert!(from_ini_str("[DEFAULT]\nservicegroup_driver = db\n").is_ok());
}

#[test]
fn every_read_not_used_option_set_off_its_default_is_named_at_startup() {
    let c = from_ini_str(
        "[filter_scheduler]\navailable_filters = mycloud.filters.all\n\
         track_instance_changes = true\n[DEFAULT]\ninternal_service_availability_zone = int\n\
         [upgrade_levels]\ncompute = auto\n",
    )
    .unwrap();
    let warnings = c.not_honoured();
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    for (option, why) in [
        (
            "[DEFAULT] internal_service_availability_zone",
            "it changes nothing here",
        ),
        (
            "[upgrade_levels] compute",
            "every select_destinations version",
        ),
    ] {
        assert!(
            warnings.iter().any(|w| w
                .starts_with(&format!("option {option} is accepted but not honoured: "))
                && w.contains(why)),
            "{option}: {warnings:#?}"
        );
    }
    // Every option the table calls "not used" is flagged, and only those.
    for spec in options::OPTIONS {
        assert_eq!(
            spec.not_used,
            spec.help.contains("not used"),
            "[{}] {}",
            spec.group,
            spec.name
        );
    }
}
