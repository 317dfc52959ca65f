// SPDX-License-Identifier: Apache-2.0
//! An operator's own filters and weighers in the daemon binary, called by nova's own
//! `SchedulerAPI` over RabbitMQ, claiming in the real Placement: the example
//! WebAssembly plugin (`examples/wasm-plugin`: a rack filter and a rack-spreading
//! weigher) beside an operator's Python filter class (`tests/plugins/mycloud_filters.py`,
//! run in the embedded interpreter). Each request lands where both say; the two
//! instances of one call spread over the racks (the weigher sees the first one's
//! consumption); a request they leave no host for is NoValidHost, and the daemon's
//! log line for it carries the plugin's own reason for each host.

use crate::capacity_tools::RunningDaemon;
use crate::claims_cloud::{aggregate, Cloud};
use crate::daemon_proc::nova_client;
use crate::nova_schema;
use crate::venv;
use crate::wasm_example;
use serde_json::{json, Value};
use sqlx::MySqlPool;

/// Runs each case of `argv[3]` (a JSON list of `{extra_specs, hints, instances}`)
/// through nova's client; prints per case the chosen hosts or the failure.
const CLIENT: &str = r#"
import json, sys, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[2])
import nsrs_helpers as H
H.init_nova_client(sys.argv[1])
from nova import exception
from nova.scheduler import rpcapi
ctxt = H.user_context()
out = []
for case in json.loads(sys.argv[3]):
    uuids = [H.new_uuid() for _ in range(case["instances"])]
    flavor = H.make_flavor(1, 512, 1)
    flavor.extra_specs = dict(case["extra_specs"])
    spec = H.make_spec(ctxt, flavor, uuids, scheduler_hints=case["hints"])
    try:
        sel = rpcapi.SchedulerAPI().select_destinations(
            ctxt, spec, uuids, return_objects=True, return_alternates=False)
        out.append({"hosts": [s[0].service_host for s in sel], "uuids": uuids})
    except exception.NoValidHost as e:
        out.append({"failure": "NoValidHost", "message": str(e), "uuids": uuids})
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_runs_an_operators_wasm_and_python_plugins_for_novas_client() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let venv = venv::find();
    let module = wasm_example::example_module();
    let cloud = Cloud::new("plugind").await;
    let racks = [
        ("r1", ["pgd-r1-a", "pgd-r1-b"]),
        ("r2", ["pgd-r2-a", "pgd-r2-b"]),
    ];
    for (_, hosts) in racks {
        for host in hosts {
            cloud.host(host, (16, 1.0), 16384, 200).await;
        }
    }
    let api = MySqlPool::connect(&nova_schema::sqlx_url(&cloud.api_db))
        .await
        .expect("API database");
    aggregate(
        &api,
        "rack-1",
        &[("rack", "r1"), ("licence", "oracle")],
        &racks[0].1,
    )
    .await;
    aggregate(&api, "rack-2", &[("rack", "r2")], &racks[1].1).await;

    let dir = std::env::temp_dir().join(format!("nsrs-plugind-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let extra = format!(
        "wasm_plugins = {module}\npython = {python}\n\
         [filter_scheduler]\n\
         available_filters = nova.scheduler.filters.all_filters\n\
         available_filters = mycloud_filters.all_filters\n\
         enabled_filters = ComputeFilter,LicenceFilter,mycloud_rack\n\
         weight_classes = mycloud_rack\n",
        module = module.display(),
        python = venv::with_operator_plugins(&dir, &venv).display(),
    );
    let daemon = RunningDaemon::start(&cloud, &dir, "plugins", &extra).await;
    let client_conf = dir.join("client.conf");
    std::fs::write(
        &client_conf,
        format!(
            "[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:5672/{}\n",
            daemon.vhost
        ),
    )
    .unwrap();

    // The flavor must ask for this cloud's hosts (its trait), as every request here.
    let tag = format!("trait:{}", cloud.tag);
    let case = |extra: Value, hints: Value, instances: usize| {
        let mut specs = json!({ tag.as_str(): "required" });
        for (k, v) in extra.as_object().unwrap() {
            specs[k] = v.clone();
        }
        json!({"extra_specs": specs, "hints": hints, "instances": instances})
    };
    // The first call meets empty racks (the daemon's cache then counts what it
    // placed, as the weigher sees it).
    let cases = vec![
        case(json!({}), json!({}), 2),
        case(json!({"mycloud:rack": "r2"}), json!({}), 1),
        case(json!({}), json!({"rack": "r1"}), 1),
        case(json!({"mycloud:licence": "oracle"}), json!({}), 1),
        case(
            json!({"mycloud:licence": "oracle", "mycloud:rack": "r2"}),
            json!({}),
            1,
        ),
    ];
    let out = nova_client(
        &venv,
        CLIENT,
        &client_conf,
        &[serde_json::to_string(&cases).unwrap()],
    );
    assert!(
        out.status.success(),
        "nova's client: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        daemon.daemon.log_text()
    );
    let answers: Vec<Value> =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    let rack_of = |host: &Value| {
        let host = host.as_str().unwrap();
        racks
            .iter()
            .find(|(_, hosts)| hosts.contains(&host))
            .map(|(rack, _)| *rack)
            .unwrap_or_else(|| panic!("{host} is not a host of this cloud"))
    };
    let log = daemon.daemon.log_text();
    // Two instances of one call into empty racks: the Wasm weigher, seeing the
    // whole list with the first instance consumed, sends the second to the other
    // rack.
    let spread: Vec<&str> = answers[0]["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(rack_of)
        .collect();
    assert!(
        spread.len() == 2 && spread[0] != spread[1],
        "{answers:?}\n{log}"
    );
    // The Wasm filter keeps the flavor's rack, then the hint's; the Python class
    // keeps the licensed rack.
    assert_eq!(rack_of(&answers[1]["hosts"][0]), "r2", "{answers:?}");
    assert_eq!(rack_of(&answers[2]["hosts"][0]), "r1", "{answers:?}");
    assert_eq!(rack_of(&answers[3]["hosts"][0]), "r1", "{answers:?}");
    // The Python class leaves rack r1, the Wasm filter wants r2: no host, and the
    // daemon says why in the plugin's own words.
    assert_eq!(answers[4]["failure"], "NoValidHost", "{answers:?}");
    assert!(
        log.contains("host is in rack r1; the request asks for rack r2"),
        "{log}"
    );
    // Claims were made for each placed instance, none for the refused one.
    for answer in &answers[..4] {
        for instance in answer["uuids"].as_array().unwrap() {
            let instance = instance.as_str().unwrap();
            assert_eq!(
                cloud.admin.providers_held(instance).await.len(),
                1,
                "the claim of {instance}"
            );
            cloud.admin.delete_allocations(instance).await;
        }
    }
    let refused = answers[4]["uuids"][0].as_str().unwrap();
    assert!(cloud.admin.providers_held(refused).await.is_empty());
    daemon.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
