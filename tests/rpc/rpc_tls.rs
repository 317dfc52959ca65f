// SPDX-License-Identifier: Apache-2.0
//! TLS to the broker (`[oslo_messaging_rabbit] ssl = true`, `ssl_ca_file`,
//! `ssl_cert_file`, `ssl_key_file`) against a private RabbitMQ node whose TLS listener
//! uses certificates made by the test and requires a client certificate.
//!
//! The right CA and client certificate connect and serve calls; a wrong CA, or no client
//! certificate, do not connect.

use crate::private_rabbit;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};
use nova_scheduler::rpc::envelope::encode_envelope;
use nova_scheduler::rpc::{
    check_connection, BrokerAddress, Endpoint, EndpointFuture, IncomingCall, RpcError, RpcServer,
    RpcServerOptions, TlsOptions,
};
use private_rabbit::PrivateRabbit;
use serde_json::{json, Value};

struct Echo;

impl Endpoint for Echo {
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn version(&self) -> (u32, u32) {
        (4, 5)
    }
    fn has_method(&self, method: &str) -> bool {
        method == "echo"
    }
    fn call(&self, call: IncomingCall) -> EndpointFuture {
        Box::pin(async move { Ok(Value::Object(call.args)) })
    }
}

fn tls_options(
    rabbit: &PrivateRabbit,
    ca: &std::path::Path,
    client_cert: bool,
) -> RpcServerOptions {
    let pki = rabbit.pki.as_ref().unwrap();
    RpcServerOptions {
        brokers: vec![BrokerAddress {
            host: "localhost".into(),
            port: rabbit.amqps_port.unwrap(),
            username: "guest".into(),
            password: "guest".into(),
            virtual_host: String::new(),
        }],
        control_exchange: "nova".into(),
        topic: "scheduler".into(),
        server: "tls-host".into(),
        ssl: Some(TlsOptions {
            ca_file: Some(ca.to_path_buf()),
            cert_file: client_cert.then(|| pki.client_cert.clone()),
            key_file: client_cert.then(|| pki.client_key.clone()),
        }),
        retry_interval: 0.2,
        retry_backoff: 0.2,
        interval_max: 1.0,
        ..Default::default()
    }
}

/// One test: the private node starts once per binary (5–15 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_the_right_ca_only() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("nova_scheduler=info,lapin=warn")
        .try_init();
    let rabbit = tokio::task::spawn_blocking(|| PrivateRabbit::start_tls("tls"))
        .await
        .unwrap();
    let pki = rabbit.pki.clone().unwrap();

    // A CA that did not sign the broker's certificate: no connection.
    let err = check_connection(&tls_options(&rabbit, &pki.wrong_ca, true))
        .await
        .expect_err("connected although the CA did not sign the broker's certificate");
    assert!(matches!(err, RpcError::Connect { .. }), "{err}");
    let text = err.to_string().to_lowercase();
    assert!(
        text.contains("certificate") || text.contains("issuer"),
        "{err}"
    );

    // The right CA but no client certificate: the broker (verify_peer,
    // fail_if_no_peer_cert) refuses the handshake.
    let err = check_connection(&tls_options(&rabbit, &pki.ca, false))
        .await
        .expect_err("connected without the client certificate the broker requires");
    assert!(matches!(err, RpcError::Connect { .. }), "{err}");

    // The right CA and client certificate: the server runs over TLS and answers a call
    // sent by a client on the plain listener of the same broker.
    check_connection(&tls_options(&rabbit, &pki.ca, true))
        .await
        .expect("TLS connection with the right CA");
    // The checks' closed connections may stay listed by the broker for a while: the
    // server's connections are the ones that appear after this listing.
    let before_server = connections(&rabbit);
    let server = RpcServer::new(
        tls_options(&rabbit, &pki.ca, true),
        vec![Arc::new(Echo) as Arc<dyn Endpoint>],
    )
    .unwrap();
    let mut ready = server.ready();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    tokio::time::timeout(Duration::from_secs(30), ready.wait_for(|r| *r))
        .await
        .expect("the server did not become ready over TLS")
        .unwrap();

    let conn = Connection::connect(&rabbit.amqp_url(), ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    let reply_q = format!("reply_{}", uuid::Uuid::new_v4().simple());
    ch.queue_declare(
        reply_q.as_str().into(),
        QueueDeclareOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    let mut replies = ch
        .basic_consume(
            reply_q.as_str().into(),
            "c".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let msg_id = uuid::Uuid::new_v4().simple().to_string();
    let request = json!({
        "method": "echo", "args": {"over": "tls"}, "version": "4.5",
        "_msg_id": msg_id, "_reply_q": reply_q, "_timeout": null,
        "_unique_id": uuid::Uuid::new_v4().simple().to_string(),
        "_context_request_id": "req-tls",
    });
    ch.basic_publish(
        "nova".into(),
        "scheduler".into(),
        BasicPublishOptions::default(),
        &encode_envelope(&request),
        BasicProperties::default().with_content_type("application/json".into()),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    let delivery = tokio::time::timeout(Duration::from_secs(20), replies.next())
        .await
        .expect("no reply over TLS")
        .unwrap()
        .unwrap();
    delivery.ack(BasicAckOptions::default()).await.unwrap();
    let outer: Value = serde_json::from_slice(&delivery.data).unwrap();
    let reply: Value = serde_json::from_str(outer["oslo.message"].as_str().unwrap()).unwrap();
    assert_eq!(reply["_msg_id"], msg_id.as_str());
    assert_eq!(reply["result"], json!({"over": "tls"}));
    assert_eq!(reply["failure"], Value::Null);

    // The server's connections (listener and replies) are the new ones, over TLS; the
    // only plain connection is this test's client.
    let tls_port = format!("-> 127.0.0.1:{}", rabbit.amqps_port.unwrap());
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let now = connections(&rabbit);
        let new: Vec<&(bool, String)> = now.difference(&before_server).collect();
        let plain = now.iter().filter(|(tls, _)| !tls).count();
        let new_tls = new
            .iter()
            .filter(|(tls, name)| *tls && name.ends_with(&tls_port))
            .count();
        if new_tls == 2 && new.len() == 3 && plain == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "expected the listener's and the reply's connections over TLS and one plain \
             client connection; before the server: {before_server:?}, now: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(40), task)
        .await
        .expect("server did not stop")
        .unwrap()
        .unwrap();
    let _ = conn.close(200, "OK".into()).await;
    tokio::task::spawn_blocking(move || drop(rabbit))
        .await
        .unwrap();
}

/// The broker's connections: `(over TLS, "client -> broker")`.
fn connections(rabbit: &PrivateRabbit) -> std::collections::BTreeSet<(bool, String)> {
    let listing = rabbit.ctl(&["list_connections", "ssl", "name"]);
    String::from_utf8_lossy(&listing.stdout)
        .lines()
        .filter_map(|line| {
            let (ssl, name) = line.split_once('\t')?;
            match ssl {
                "true" => Some((true, name.to_string())),
                "false" => Some((false, name.to_string())),
                _ => None,
            }
        })
        .collect()
}
