// SPDX-License-Identifier: Apache-2.0
//! `run` and `config check` are two doors to one validation: a corpus of bad
//! configurations, at least one for every kind of refusal `run` can make before it
//! connects ([`RefusalKind::ALL`]), is refused by both with the same words (`run`
//! exits 64, `config check` 1), and a corpus of good ones (nova's own sample with every
//! option at its default among them) passes both: `config check` says OK and `run`
//! gets past its checks to the first database, which is not there.

use std::path::Path;
use std::process::{Command, Output};

use nova_scheduler::app::preflight::{prepare, RefusalKind};
use nova_scheduler::config::{load_from_cli_with_errors, parse_cli_args};

/// The password every case's URLs carry; no output may show it.
const SECRET: &str = "s3cret";

/// A configuration that passes, with nothing listening where it points (port 1).
fn base(scratch: &Path) -> String {
    format!(
        "[DEFAULT]\ntransport_url = rabbit://nova:{SECRET}@127.0.0.1:1/\n\
         [database]\nconnection = mysql+pymysql://nova:{SECRET}@127.0.0.1:1/nova_cell0\n\
         max_retries = 0\n\
         [api_database]\nconnection = mysql+pymysql://nova:{SECRET}@127.0.0.1:1/nova_api\n\
         max_retries = 0\n\
         [nova_scheduler_rs]\nstate_dir = {}\n\
         [placement]\nendpoint_override = http://127.0.0.1:1\n",
        scratch.join("state").display()
    )
}

/// [`base`] without one of its groups.
fn base_without(scratch: &Path, group: &str) -> String {
    let mut out = String::new();
    let mut skipping = false;
    for line in base(scratch).lines() {
        if line.starts_with('[') {
            skipping = line == format!("[{group}]");
        }
        if !skipping {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

struct Case {
    name: &'static str,
    /// The refusal expected; `None` for a configuration that must pass.
    kind: Option<RefusalKind>,
    conf: String,
    /// More command-line arguments after `--config-file <conf>`.
    args: Vec<String>,
    /// `OS_<GROUP>__<OPTION>` variables for the binary (not the in-process check).
    env: Vec<(&'static str, &'static str)>,
    /// A piece of the refusal's text.
    expect: &'static str,
}

fn bad(name: &'static str, kind: RefusalKind, conf: String, expect: &'static str) -> Case {
    Case {
        name,
        kind: Some(kind),
        conf,
        args: Vec::new(),
        env: Vec::new(),
        expect,
    }
}

fn good(name: &'static str, conf: String) -> Case {
    Case {
        name,
        kind: None,
        conf,
        args: Vec::new(),
        env: Vec::new(),
        expect: "",
    }
}

fn bad_cases(scratch: &Path) -> Vec<Case> {
    use RefusalKind::*;
    let b = base(scratch);
    let with = |extra: &str| format!("{b}{extra}");
    let a_file = scratch.join("a-file");
    std::fs::write(&a_file, "").unwrap();
    let mut cases = vec![
        Case {
            args: vec!["--config-file".into(), "/nonexistent/nova.conf".into()],
            ..bad("a missing config file", File, b.clone(), "/nonexistent/nova.conf: config file not found")
        },
        Case {
            args: vec!["--config-dir".into(), "/nonexistent/nova.conf.d".into()],
            ..bad("a missing config dir", File, b.clone(), "/nonexistent/nova.conf.d: config directory not found")
        },
        bad("a section header left open", Syntax, with("[scheduler\nmax_attempts = 2\n"), "Invalid section"),
        bad("an option before any section", Syntax, format!("max_attempts = 2\n{b}"), "Section must be started before assignment"),
        bad("an integer that is a word", Value, with("[scheduler]\nmax_attempts = zero\n"), "[scheduler] max_attempts"),
        bad("an integer below its minimum", Value, with("[filter_scheduler]\nhost_subset_size = 0\n"), "[filter_scheduler] host_subset_size"),
        bad("a boolean that is neither", Value, with("[DEFAULT]\ndebug = maybe\n"), "[DEFAULT] debug"),
        bad("a float that is a word", Value, with("[filter_scheduler]\nram_weight_multiplier = heavy\n"), "[filter_scheduler] ram_weight_multiplier"),
        bad("a listen address that is none", Value, with("[nova_scheduler_rs]\nhttp_listen = not-an-address\n"), "[nova_scheduler_rs] http_listen"),
        bad("a negative interval", Value, with("[DEFAULT]\nreport_interval = -5\n"), "[DEFAULT] report_interval"),
        bad("a transport URL that is not one", Value, with("[DEFAULT]\ntransport_url = not a url\n"), "[DEFAULT] transport_url"),
        bad("a transport URL with an unknown query", Value, with(&format!("[DEFAULT]\ntransport_url = rabbit://nova:{SECRET}@127.0.0.1:1/?frobnicate=1\n")), "frobnicate"),
        bad("an SQLite database", Value, with("[database]\nconnection = sqlite:////var/lib/nova/nova.sqlite\n"), "only MySQL/MariaDB"),
        bad("a PostgreSQL API database", Value, with(&format!("[api_database]\nconnection = postgresql://nova:{SECRET}@127.0.0.1/nova_api\n")), "[api_database] connection"),
        bad("a database TLS mode that is none", Value, with(&format!("[database]\nconnection = mysql+pymysql://nova:{SECRET}@127.0.0.1:1/nova?ssl_mode=SOMETIMES\n")), "ssl_mode"),
        bad("a CA directory for the database", Value, with(&format!("[api_database]\nconnection = mysql+pymysql://nova:{SECRET}@127.0.0.1:1/nova_api?ssl_capath=/etc/ssl/certs\n")), "ssl_capath"),
        bad("a prefetch count that is a word", Value, with("[oslo_messaging_rabbit]\nrabbit_qos_prefetch_count = many\n"), "rabbit_qos_prefetch_count"),
        bad("a negative crash count", Value, with("[nova_scheduler_rs]\nmax_message_crashes = -1\n"), "max_message_crashes"),
        bad("a message bound too small", Value, with("[nova_scheduler_rs]\nmax_message_bytes = 1000\n"), "max_message_bytes"),
        bad("a weigher multiplier that is a word", Value, with("[filter_scheduler]\ncpu_weight_multiplier = lots\n"), "cpu_weight_multiplier"),
        bad("a shuffle flag that is neither", Value, with("[filter_scheduler]\nshuffle_best_same_weighed_hosts = perhaps\n"), "shuffle_best_same_weighed_hosts"),
        bad("a cache interval that is a word", Value, with("[nova_scheduler_rs]\nhost_state_refresh_interval = often\n"), "host_state_refresh_interval"),
        bad("a max_instances_per_request of 0", Value, with("[nova_scheduler_rs]\nmax_instances_per_request = 0\n"), "max_instances_per_request"),
        Case {
            env: vec![("OS_SCHEDULER__MAX_ATTEMPTS", "zero")],
            ..bad("a bad value in the environment", Value, b.clone(), "OS_SCHEDULER__MAX_ATTEMPTS")
        },
        bad("memcached service groups", Invalid, with("[DEFAULT]\nservicegroup_driver = mc\n"), "servicegroup_driver"),
        bad("quorum and HA queues at once", Invalid, with("[oslo_messaging_rabbit]\nrabbit_quorum_queue = true\nrabbit_ha_queues = true\n"), "mutually exclusive"),
        bad("a pool minimum over the pool", Invalid, with("[oslo_messaging_rabbit]\nrpc_conn_pool_size = 2\nconn_pool_min_size = 3\n"), "conn_pool_min_size"),
        bad("stream fanout without prefetch", Invalid, with("[oslo_messaging_rabbit]\nrabbit_stream_fanout = true\nrabbit_transient_quorum_queue = true\n"), "rabbit_stream_fanout"),
        bad("syslog with an unknown facility", Invalid, with("[DEFAULT]\nuse_syslog = true\nsyslog_log_facility = LOG_NOWHERE\n"), "syslog_log_facility"),
        bad("an unknown filter", PipelineClass, with("[filter_scheduler]\nenabled_filters = ComputeFilter,NoSuchFilter\n"), "NoSuchFilter"),
        bad("a custom filter class path", PipelineClass, with("[filter_scheduler]\navailable_filters = nova.scheduler.filters.all_filters\nenabled_filters = ComputeFilter,mycloud.filters.RackFilter\n"), "RackFilter"),
        bad("an unknown weigher", PipelineClass, with("[filter_scheduler]\nweight_classes = nova.scheduler.weights.NoSuchWeigher\n"), "NoSuchWeigher"),
        bad("no API database", Database, base_without(scratch, "api_database"), "[api_database] connection is required"),
        bad("no main database", Database, base_without(scratch, "database"), "[database] connection is required"),
        bad("an unknown Placement auth plugin", PlacementAuth, with("[placement]\nauth_type = v3oidcpassword\n"), "v3oidcpassword"),
        bad("admin_token auth without a token", PlacementAuth, with("[placement]\nauth_type = admin_token\n"), "needs token"),
        bad("password auth without auth_url", PlacementAuth, with(&format!("[placement]\nauth_type = password\nusername = nova\npassword = {SECRET}\nuser_domain_name = Default\n")), "needs auth_url"),
        bad("routed network aggregates", RequestFilter, with("[scheduler]\nquery_placement_for_routed_network_aggregates = true\n"), "routed network"),
        bad("a notification URL that is not one", NotificationTransport, with("[oslo_messaging_notifications]\ndriver = messagingv2\ntransport_url = not a url\n"), "[oslo_messaging_notifications] transport_url"),
        bad("a broker CA that is not there", TlsFile, with("[oslo_messaging_rabbit]\nssl = true\nssl_ca_file = /nonexistent/ca.pem\n"), "[oslo_messaging_rabbit] ssl_ca_file = /nonexistent/ca.pem"),
        bad("a broker certificate that is not there", TlsFile, with("[oslo_messaging_rabbit]\nssl = true\nssl_cert_file = /nonexistent/cert.pem\nssl_key_file = /nonexistent/key.pem\n"), "ssl_cert_file"),
        bad("a database CA that is not there", TlsFile, with(&format!("[database]\nconnection = mysql+pymysql://nova:{SECRET}@127.0.0.1:1/nova?ssl_ca=/nonexistent/db-ca.pem\n")), "/nonexistent/db-ca.pem"),
        bad("a Placement CA that is not there", TlsFile, with("[placement]\ncafile = /nonexistent/placement-ca.pem\n"), "cafile /nonexistent/placement-ca.pem"),
        bad("a Placement client certificate that is not there", TlsFile, with("[placement]\ncertfile = /nonexistent/client.pem\nkeyfile = /nonexistent/client.key\n"), "/nonexistent/client.pem"),
        bad("a client key without its certificate", PlacementAuth, with("[placement]\nkeyfile = /nonexistent/client.key\n"), "keyfile"),
        bad("an application credential without its secret", PlacementAuth, with("[placement]\nauth_type = v3applicationcredential\nauth_url = http://ks:5000/v3\napplication_credential_id = 0a1b\n"), "application_credential_secret"),
        bad("a state_dir below a file", StateDir, with(&format!("[nova_scheduler_rs]\nstate_dir = {}/below\n", a_file.display())), "is not a directory"),
        bad("a state_dir below /dev/null", StateDir, with("[nova_scheduler_rs]\nstate_dir = /dev/null/nova-scheduler-rs\n"), "state_dir"),
        bad("a recording in a missing directory", RecordCalls, with("[nova_scheduler_rs]\nrecord_calls = /nonexistent/nsrs/calls.jsonl.gz\n"), "record_calls = /nonexistent/nsrs/calls.jsonl.gz"),
    ];
    // Every problem at once: a bad value does not hide the filter after it.
    cases.push(bad(
        "a bad value and an unknown filter together",
        PipelineClass,
        with("[scheduler]\nmax_attempts = zero\n[filter_scheduler]\nenabled_filters = NoSuchFilter\n"),
        "2 configuration errors",
    ));
    cases
}

fn good_cases(scratch: &Path, nova_sample: &str) -> Vec<Case> {
    let b = base(scratch);
    let with = |extra: &str| format!("{b}{extra}");
    let tls_file = scratch.join("some.pem");
    std::fs::write(&tls_file, "not checked for content here\n").unwrap();
    let tls = tls_file.display();
    let conf_d = scratch.join("nova.conf.d");
    std::fs::create_dir_all(&conf_d).unwrap();
    std::fs::write(
        conf_d.join("10-scheduler.conf"),
        "[scheduler]\nmax_attempts = 5\n",
    )
    .unwrap();
    std::fs::write(
        conf_d.join("20-filters.conf"),
        "[filter_scheduler]\nhost_subset_size = 2\n",
    )
    .unwrap();
    vec![
        good("the base", b.clone()),
        // nova's own sample with every option at its default, then ours.
        good("nova's sample uncommented", format!("{}{b}", uncommented(nova_sample))),
        good(
            "our sample uncommented",
            format!("{}{b}", uncommented(include_str!("../../config/nova.conf.sample"))),
        ),
        good(
            "a compute-and-controller nova.conf",
            with(
                "[DEFAULT]\nmy_ip = 10.0.0.11\ninstances_path = /var/lib/nova/instances\n\
                 compute_driver = libvirt.LibvirtDriver\n\
                 [keystone_authtoken]\nwww_authenticate_uri = http://ks:5000\nauth_type = password\n\
                 [glance]\napi_servers = http://glance:9292\n[neutron]\nauth_type = password\n\
                 [libvirt]\nvirt_type = kvm\n[oslo_concurrency]\nlock_path = /var/lib/nova/tmp\n\
                 [wsgi]\napi_paste_config = /etc/nova/api-paste.ini\n",
            ),
        ),
        good(
            "keystone password auth from auth_section",
            with(&format!(
                "[placement]\nauth_section = keystone_authtoken\nregion_name = RegionOne\n\
                 [keystone_authtoken]\nauth_type = password\nauth_url = http://ks:5000/v3\n\
                 username = nova\npassword = {SECRET}\nuser_domain_name = Default\n\
                 project_name = service\nproject_domain_name = Default\n"
            )),
        ),
        good(
            "admin token auth",
            with(&format!("[placement]\nauth_type = admin_token\ntoken = {SECRET}\nendpoint_override = http://127.0.0.1:1\n")),
        ),
        good(
            "TLS files that exist",
            with(&format!(
                "[oslo_messaging_rabbit]\nssl = true\nssl_ca_file = {tls}\nssl_cert_file = {tls}\n\
                 ssl_key_file = {tls}\n\
                 [api_database]\nconnection = mysql+pymysql://nova:{SECRET}@127.0.0.1:1/nova_api?ssl_ca={tls}\n"
            )),
        ),
        good(
            "the fast path and notifications on their own broker",
            with(&format!(
                "[placement_database]\nconnection = mysql+pymysql://p:{SECRET}@127.0.0.1:1/placement\n\
                 max_retries = 0\n\
                 [oslo_messaging_notifications]\ndriver = messagingv2\n\
                 transport_url = rabbit://n:{SECRET}@127.0.0.1:1/notifications\n\
                 [notifications]\nnotification_format = both\n"
            )),
        ),
        good(
            "every filter nova ships, weighers listed",
            with(
                "[filter_scheduler]\nenabled_filters = AggregateImagePropertiesIsolation,\
                 AggregateInstanceExtraSpecsFilter,AggregateIoOpsFilter,\
                 AggregateMultiTenancyIsolation,AggregateNumInstancesFilter,\
                 AggregateTypeAffinityFilter,AllHostsFilter,ComputeCapabilitiesFilter,\
                 ComputeFilter,DifferentHostFilter,ImagePropertiesFilter,IoOpsFilter,\
                 IsolatedHostsFilter,JsonFilter,MetricsFilter,NUMATopologyFilter,\
                 NumInstancesFilter,PciPassthroughFilter,SameHostFilter,\
                 ServerGroupAffinityFilter,ServerGroupAntiAffinityFilter,\
                 SimpleCIDRAffinityFilter\n\
                 weight_classes = nova.scheduler.weights.ram.RAMWeigher,\
                 nova.scheduler.weights.cpu.CPUWeigher\n",
            ),
        ),
        good(
            "the guard off where no state can be kept",
            with("[nova_scheduler_rs]\nmax_message_crashes = 0\nstate_dir = /dev/null/x\n"),
        ),
        good(
            "an observability listener and debug",
            with("[DEFAULT]\ndebug = true\n[nova_scheduler_rs]\nhttp_listen = 127.0.0.1:0\n"),
        ),
        Case {
            args: vec!["--config-dir".into(), conf_d.display().to_string()],
            ..good("a config dir after the file", b.clone())
        },
        Case {
            env: vec![("OS_DEFAULT__DEBUG", "true")],
            ..good("an override in the environment", b.clone())
        },
    ]
}

/// An oslo sample with every option written at its default (`#name = value`
/// uncommented), except the computed and unset ones.
fn uncommented(sample: &str) -> String {
    let mut out = String::new();
    for line in sample.lines() {
        if line.starts_with('[') {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let Some(option) = line.strip_prefix('#') else {
            continue;
        };
        let Some((name, value)) = option.split_once(" = ") else {
            continue;
        };
        let is_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !is_name || value.starts_with('<') {
            continue;
        }
        out.push_str(&format!("{name} = {value}\n"));
    }
    out
}

fn binary(args: &[String], env: &[(&str, &str)], home: &Path) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nova-scheduler-rs"));
    cmd.args(args).env("HOME", home).env_remove("NOTIFY_SOCKET");
    for (name, _) in std::env::vars().filter(|(n, _)| n.starts_with("OS_")) {
        cmd.env_remove(name);
    }
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.output().expect("run nova-scheduler-rs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(tag: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("nsrs-doors-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

fn case_args(dir: &Path, case: &Case, i: usize) -> Vec<String> {
    let conf = dir.join(format!("case-{i}.conf"));
    std::fs::write(&conf, &case.conf).unwrap();
    let mut args = vec!["--config-file".to_string(), conf.display().to_string()];
    args.extend(case.args.iter().cloned());
    args
}

#[test]
fn run_and_config_check_refuse_the_same_configurations_alike() {
    let dir = scratch("bad");
    let cases = bad_cases(&dir.0);
    assert!(cases.len() >= 40, "{} bad configurations", cases.len());
    let mut kinds_seen = Vec::new();
    let mut problems = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let kind = case.kind.unwrap();
        let args = case_args(&dir.0, case, i);
        // In-process: the refusal has the kind the case is about.
        if case.env.is_empty() {
            let cli = parse_cli_args(args.iter().map(String::as_str)).unwrap();
            let (config, errors) = load_from_cli_with_errors(&cli);
            match prepare(&config, errors) {
                Ok(_) => problems.push(format!("{}: passed in process", case.name)),
                Err(refused) if refused.kinds().contains(&kind) => kinds_seen.push(kind),
                Err(refused) => problems.push(format!(
                    "{}: {kind:?} not among {:?}: {refused}",
                    case.name,
                    refused.kinds()
                )),
            }
        }
        // The two doors of the binary.
        let run = binary(&args, &case.env, &dir.0);
        let mut check_args = vec!["config".to_string(), "check".to_string()];
        check_args.extend(args.iter().cloned());
        let check = binary(&check_args, &case.env, &dir.0);
        let (run_err, check_err) = (text(&run.stderr), text(&check.stderr));
        let name = case.name;
        if run.status.code() != Some(64) {
            problems.push(format!(
                "{name}: run exited {:?}: {run_err}",
                run.status.code()
            ));
        }
        if check.status.code() != Some(1) {
            problems.push(format!(
                "{name}: check exited {:?}: {check_err}",
                check.status.code()
            ));
        }
        if !(run_err.starts_with("Invalid configuration:\n") && run_err.contains(case.expect)) {
            problems.push(format!(
                "{name}: expected {:?}; run said: {run_err}",
                case.expect
            ));
        }
        if run_err != check_err {
            problems.push(format!(
                "{name}: the doors differ:\n{run_err}\n---\n{check_err}"
            ));
        }
        if text(&check.stdout).contains("configuration OK") {
            problems.push(format!("{name}: check said OK"));
        }
        for out in [&run_err, &check_err, &text(&check.stdout)] {
            if out.contains(SECRET) {
                problems.push(format!("{name}: a secret shown: {out}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    let missing: Vec<RefusalKind> = RefusalKind::ALL
        .into_iter()
        .filter(|k| !kinds_seen.contains(k))
        .collect();
    assert!(missing.is_empty(), "no bad configuration for {missing:?}");
}

#[test]
fn good_configurations_pass_both_doors() {
    let dir = scratch("good");
    let venv = crate::venv::find();
    let generated = Command::new(venv.join("bin/oslo-config-generator"))
        .args([
            "--namespace",
            "nova.conf",
            "--namespace",
            "oslo.log",
            "--namespace",
            "oslo.messaging",
            "--namespace",
            "oslo.db",
            "--namespace",
            "keystonemiddleware.auth_token",
        ])
        .env("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
        .output()
        .expect("oslo-config-generator");
    assert!(generated.status.success(), "{}", text(&generated.stderr));
    let nova_sample = text(&generated.stdout);
    assert!(
        nova_sample.contains("[filter_scheduler]"),
        "not nova's sample"
    );
    let cases = good_cases(&dir.0, &nova_sample);
    assert!(cases.len() >= 10);
    for (i, case) in cases.iter().enumerate() {
        let args = case_args(&dir.0, case, i);
        if case.env.is_empty() {
            let cli = parse_cli_args(args.iter().map(String::as_str)).unwrap();
            let (config, errors) = load_from_cli_with_errors(&cli);
            if let Err(refused) = prepare(&config, errors) {
                panic!("{}: refused: {refused}", case.name);
            }
        }
        let mut check_args = vec!["config".to_string(), "check".to_string()];
        check_args.extend(args.iter().cloned());
        let check = binary(&check_args, &case.env, &dir.0);
        assert_eq!(
            check.status.code(),
            Some(0),
            "{}: check: {}{}",
            case.name,
            text(&check.stdout),
            text(&check.stderr)
        );
        assert!(
            text(&check.stdout).contains("configuration OK"),
            "{}",
            case.name
        );
        // `run` gets past its checks and stops at the first database (port 1).
        let run = binary(&args, &case.env, &dir.0);
        let run_err = text(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{}: run: {run_err}", case.name);
        assert!(
            !run_err.contains("Invalid configuration"),
            "{}: {run_err}",
            case.name
        );
        assert!(
            run_err.contains("cannot connect to the database"),
            "{}: {run_err}",
            case.name
        );
        assert!(!run_err.contains(SECRET), "{}: {run_err}", case.name);
    }
}

#[test]
fn config_check_exits_2_when_no_file_was_read() {
    let dir = scratch("none");
    let empty = dir.0.join("empty.d");
    std::fs::create_dir_all(&empty).unwrap();
    let none = binary(
        &[
            "config".into(),
            "check".into(),
            "--config-dir".into(),
            empty.display().to_string(),
        ],
        &[],
        &dir.0,
    );
    assert_eq!(none.status.code(), Some(2), "{none:?}");
    assert!(text(&none.stderr).contains("no configuration file was read"));
    // A wrong path: refused, and nothing read either.
    let wrong = binary(
        &[
            "config".into(),
            "check".into(),
            "--config-dir".into(),
            "/nonexistent/nova.conf.d".into(),
        ],
        &[],
        &dir.0,
    );
    assert_eq!(wrong.status.code(), Some(2), "{wrong:?}");
    assert!(text(&wrong.stderr).contains("/nonexistent/nova.conf.d"));
}

/// `config check --connect` reaches the real peers once each: MariaDB with nova's
/// schema (`[database]`, `[api_database]` and the cell `cell_mappings` names),
/// RabbitMQ and Placement. With the broker and Placement pointed where nothing
/// listens, each is named `FAILED` with its reason and the exit code is 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_check_connect_reaches_each_peer_once() {
    let venv = crate::venv::find();
    let prefix = crate::nova_schema::tagged("nsrs_doors_connect");
    crate::nova_schema::create_from_template(&venv, &prefix, &["cell1"])
        .await
        .unwrap_or_else(|e| panic!("nova schema: {e}"));
    let placement = crate::placement_server::url().await;
    let dir = scratch("connect");
    let conf_with = |name: &str, broker: &str, placement: &str, extra: &str| {
        let path = dir.0.join(name);
        std::fs::write(
            &path,
            format!(
                "[DEFAULT]\ntransport_url = {broker}\n\
                 [database]\nconnection = {cell0}\n[api_database]\nconnection = {api}\n\
                 [nova_scheduler_rs]\nstate_dir = {state}\n\
                 [placement]\nauth_type = admin_token\ntoken = admin\n\
                 endpoint_override = {placement}\n{extra}",
                cell0 = crate::nova_schema::sqla_url(&format!("{prefix}_cell0")),
                api = crate::nova_schema::sqla_url(&format!("{prefix}_api")),
                state = dir.0.join("state").display(),
            ),
        )
        .unwrap();
        path.display().to_string()
    };
    let conf = |name: &str, broker: &str, placement: &str| conf_with(name, broker, placement, "");
    let check = |path: String| {
        binary(
            &[
                "config".into(),
                "check".into(),
                "--connect".into(),
                "--config-file".into(),
                path,
            ],
            &[],
            &dir.0,
        )
    };

    let out = check(conf(
        "reachable.conf",
        "rabbit://guest:guest@127.0.0.1:5672/",
        placement,
    ));
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    for line in [
        format!("ok      database {prefix}_cell0 at "),
        format!("ok      database {prefix}_api at "),
        "ok      cell ".to_string(),
        "ok      broker 127.0.0.1:5672".to_string(),
        "ok      Placement".to_string(),
        "ok      nova release: scheduling as nova 34 (2026.2): no nova service row".to_string(),
        "every connection ok".to_string(),
    ] {
        assert!(stdout.contains(&line), "{line:?} missing: {stdout}");
    }

    // A nova 2024.1 control plane: `auto` schedules as it, where the weigher that
    // release lacks is refused, as `run` would refuse it.
    let cell0 = sqlx::MySqlPool::connect(&crate::nova_schema::sqlx_url(&format!("{prefix}_cell0")))
        .await
        .expect("cell0");
    sqlx::query(
        "INSERT INTO services (created_at, host, `binary`, topic, report_count, disabled, \
         deleted, version, forced_down) \
         VALUES (UTC_TIMESTAMP(), 'conductor-1', 'nova-conductor', 'conductor', 0, 0, 0, 67, 0)",
    )
    .execute(&cell0)
    .await
    .expect("conductor row");
    cell0.close().await;
    let broker = "rabbit://guest:guest@127.0.0.1:5672/";
    let out = check(conf("caracal.conf", broker, placement));
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("ok      nova release: scheduling as nova 29 (2024.1): the control plane's service version 67"),
        "{stdout}"
    );
    // The options that release lacks are named as `run` names them; without
    // --connect only a configured release is known.
    let multiplier = "[filter_scheduler]\nimage_props_weight_multiplier = 2.0\n";
    let lacked = "warning: [filter_scheduler] image_props_weight_multiplier is not an option \
                  of nova 29 (2024.1); ignored";
    let out = check(conf_with(
        "caracal-multiplier.conf",
        broker,
        placement,
        multiplier,
    ));
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains(lacked), "{stdout}");
    let offline = |extra: &str| {
        let path = conf_with("caracal-offline.conf", broker, placement, extra);
        let out = binary(
            &[
                "config".into(),
                "check".into(),
                "--config-file".into(),
                path,
            ],
            &[],
            &dir.0,
        );
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        text(&out.stdout)
    };
    assert!(!offline(multiplier).contains(lacked));
    let pinned = format!("{multiplier}[nova_scheduler_rs]\nnova_release = 2024.1\n");
    assert!(offline(&pinned).contains(lacked));
    let out = check(conf_with(
        "caracal-image-props.conf",
        broker,
        placement,
        "[filter_scheduler]\nweight_classes = RAMWeigher,ImagePropertiesWeigher\n",
    ));
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("FAILED  nova release: scheduling as nova 29 (2024.1)")
            && stdout.contains("ImagePropertiesWeigher (not in nova 29 (2024.1))"),
        "{stdout}"
    );

    let out = check(conf(
        "unreachable.conf",
        "rabbit://guest:guest@127.0.0.1:1/",
        "http://127.0.0.1:9",
    ));
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("FAILED  broker 127.0.0.1:1: "), "{stdout}");
    assert!(stdout.contains("FAILED  Placement: "), "{stdout}");
    assert!(
        stdout.contains(&format!("ok      database {prefix}_api at ")),
        "{stdout}"
    );
    assert!(stdout.contains("2 of "), "{stdout}");
}
