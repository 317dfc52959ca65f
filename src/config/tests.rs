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
        api.to_sqlx_url(),
        "mysql://nova:s3cr%2Ft@db:3306/nova_api?ssl-mode=DISABLED"
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
        u.to_sqlx_url(),
        "mysql://nova:pass@db.example:3307/nova?ssl-mode=DISABLED"
    );
    assert_eq!(u.unmapped_params(), vec!["plugin"]);
    assert_eq!(
        u.to_string(),
        "mysql+pymysql://nova:****@db.example:3307/nova?charset=utf8&plugin=x"
    );

    let u = DbUrl::parse("mysql://root@localhost/nova").unwrap();
    assert_eq!(u.password, None);
    assert_eq!(
        u.to_sqlx_url(),
        "mysql://root@localhost:3306/nova?ssl-mode=DISABLED"
    );

    let u = DbUrl::parse("mariadb+pymysql://nova:p%40ss%3Aw%2F@[fd00::5]/nova_cell1").unwrap();
    assert_eq!(u.password.as_ref().unwrap().expose(), "p@ss:w/");
    assert_eq!(u.host.as_deref(), Some("fd00::5"));
    assert_eq!(
        u.to_sqlx_url(),
        "mysql://nova:p%40ss%3Aw%2F@[fd00::5]:3306/nova_cell1?ssl-mode=DISABLED"
    );

    let u = DbUrl::parse("mysql+mysqldb://nova:x@/nova?unix_socket=/var/run/mysqld/mysqld.sock")
        .unwrap();
    assert_eq!(u.host, None);
    assert_eq!(
        u.to_sqlx_url(),
        "mysql://nova:x@localhost:3306/nova?ssl-mode=DISABLED&socket=/var/run/mysqld/mysqld.sock"
    );

    let u = DbUrl::parse(
        "mysql+pymysql://n:p@db/nova?ssl_ca=/etc/ca.pem&ssl_cert=/c.pem&ssl_key=/k.pem",
    )
    .unwrap();
    assert_eq!(
        u.to_sqlx_url(),
        "mysql://n:p@db:3306/nova?ssl-mode=VERIFY_IDENTITY&ssl-ca=/etc/ca.pem&ssl-cert=/c.pem&ssl-key=/k.pem"
    );
    let u =
        DbUrl::parse("mysql+pymysql://n:p@db/nova?ssl_ca=/ca&ssl_check_hostname=false").unwrap();
    assert!(u.to_sqlx_url().contains("ssl-mode=VERIFY_CA"));
    let u = DbUrl::parse("mysql://n:p@db/nova?ssl_mode=required").unwrap();
    assert!(u.to_sqlx_url().contains("ssl-mode=REQUIRED"));

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

#[test]
fn connection_parameters_are_appended() {
    let c = from_ini_str(
        "[database]\nconnection = mysql+pymysql://n:p@db/nova\nconnection_parameters = ssl_ca=/ca.pem\n",
    )
    .unwrap();
    let url = c.database_url.unwrap();
    assert!(url
        .to_sqlx_url()
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
