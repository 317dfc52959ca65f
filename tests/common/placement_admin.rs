// SPDX-License-Identifier: Apache-2.0
//! Seeding and reading the real Placement through its REST API as an admin
//! (`X-Auth-Token: admin` under `noauth2`): providers (root, nested, sharing),
//! inventories, traits, aggregates, allocations and usages. What a deployment's
//! nova-compute and operators write, written the same way.
#![allow(dead_code)]

use crate::placement_server;
use reqwest::Method;
use serde_json::{json, Value};

pub struct Admin {
    http: reqwest::Client,
    pub url: String,
}

impl Admin {
    pub async fn new() -> Admin {
        Admin {
            http: reqwest::Client::new(),
            url: placement_server::url().await.to_string(),
        }
    }

    /// One request at microversion `version`; status and JSON body (Null if none).
    pub async fn call_at(
        &self,
        version: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        self.call_as(None, version, method, path, body).await
    }

    /// [`call_at`](Self::call_at) with the roles of `X-Roles` (which the noauth2
    /// middleware takes instead of the admin token's `admin`).
    async fn call_as(
        &self,
        roles: Option<&str>,
        version: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .header("X-Auth-Token", "admin")
            .header("OpenStack-API-Version", format!("placement {version}"))
            .header("Accept", "application/json");
        if let Some(roles) = roles {
            req = req.header("X-Roles", roles);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("placement answers");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_at("1.36", method, path, body).await
    }

    /// The provider's current generation.
    pub async fn generation(&self, rp: &str) -> Value {
        let (s, body) = self
            .call(Method::GET, &format!("/resource_providers/{rp}"), None)
            .await;
        assert_eq!(s, 200, "provider {rp}: {body}");
        body["generation"].clone()
    }

    /// A provider, under `parent` when given (nested), without inventory.
    pub async fn provider(&self, uuid: &str, name: &str, parent: Option<&str>) {
        let mut body = json!({"name": name, "uuid": uuid});
        if let Some(p) = parent {
            body["parent_provider_uuid"] = json!(p);
        }
        let (s, rp) = self
            .call(Method::POST, "/resource_providers", Some(body))
            .await;
        assert_eq!(s, 200, "create provider {name}: {rp}");
    }

    /// Replaces the inventories: `{"VCPU": {"total": 8, "allocation_ratio": 2.0}, ...}`
    /// (custom resource classes are created first).
    pub async fn inventories(&self, rp: &str, inventories: Value) {
        for class in inventories
            .as_object()
            .into_iter()
            .flat_map(|m| m.keys())
            .filter(|c| c.starts_with("CUSTOM_"))
        {
            let (s, _) = self
                .call(Method::PUT, &format!("/resource_classes/{class}"), None)
                .await;
            assert!(s == 201 || s == 204, "resource class {class}: {s}");
        }
        let body = json!({"resource_provider_generation": self.generation(rp).await,
                          "inventories": inventories});
        let (s, answer) = self
            .call(
                Method::PUT,
                &format!("/resource_providers/{rp}/inventories"),
                Some(body),
            )
            .await;
        assert_eq!(s, 200, "inventories of {rp}: {answer}");
    }

    /// Replaces the traits (custom ones are created first).
    pub async fn traits(&self, rp: &str, traits: &[&str]) {
        for t in traits.iter().filter(|t| t.starts_with("CUSTOM_")) {
            let (s, _) = self.call(Method::PUT, &format!("/traits/{t}"), None).await;
            assert!(s == 201 || s == 204, "trait {t}: {s}");
        }
        let body = json!({"resource_provider_generation": self.generation(rp).await,
                          "traits": traits});
        let (s, answer) = self
            .call(
                Method::PUT,
                &format!("/resource_providers/{rp}/traits"),
                Some(body),
            )
            .await;
        assert_eq!(s, 200, "traits of {rp}: {answer}");
    }

    /// Replaces the aggregates of a provider.
    pub async fn aggregates(&self, rp: &str, aggregates: &[&str]) {
        let body = json!({"resource_provider_generation": self.generation(rp).await,
                          "aggregates": aggregates});
        let (s, answer) = self
            .call(
                Method::PUT,
                &format!("/resource_providers/{rp}/aggregates"),
                Some(body),
            )
            .await;
        assert_eq!(s, 200, "aggregates of {rp}: {answer}");
    }

    /// A compute-node-like root provider: VCPU / MEMORY_MB / DISK_GB with the given
    /// totals and allocation ratios, and traits.
    pub async fn compute_provider(
        &self,
        uuid: &str,
        name: &str,
        (vcpu, vcpu_ratio): (i64, f64),
        mem: i64,
        disk: i64,
        traits: &[&str],
    ) {
        self.provider(uuid, name, None).await;
        self.inventories(
            uuid,
            json!({"VCPU": {"total": vcpu, "allocation_ratio": vcpu_ratio},
                   "MEMORY_MB": {"total": mem, "allocation_ratio": 1.0},
                   "DISK_GB": {"total": disk, "allocation_ratio": 1.0}}),
        )
        .await;
        self.traits(uuid, traits).await;
    }

    /// `GET /allocations/{consumer}` at 1.36.
    pub async fn allocations(&self, consumer: &str) -> Value {
        self.call(Method::GET, &format!("/allocations/{consumer}"), None)
            .await
            .1
    }

    /// The providers `consumer` holds allocations on, sorted.
    pub async fn providers_held(&self, consumer: &str) -> Vec<String> {
        let held = self.allocations(consumer).await;
        let mut providers: Vec<String> = held["allocations"]
            .as_object()
            .unwrap_or_else(|| panic!("allocations of {consumer}: {held}"))
            .keys()
            .cloned()
            .collect();
        providers.sort();
        providers
    }

    /// `GET /resource_providers/{rp}/usages`: `{"VCPU": 2, ...}`.
    pub async fn usages(&self, rp: &str) -> Value {
        self.call(
            Method::GET,
            &format!("/resource_providers/{rp}/usages"),
            None,
        )
        .await
        .1["usages"]
            .clone()
    }

    /// `GET /resource_providers/{rp}/inventories`.
    pub async fn inventory(&self, rp: &str) -> Value {
        self.call(
            Method::GET,
            &format!("/resource_providers/{rp}/inventories"),
            None,
        )
        .await
        .1["inventories"]
            .clone()
    }

    /// Claims an allocation request for a new consumer the way nova-conductor does
    /// for an alternate (`claim_resources` with `consumer_generation: null`), at
    /// the Selection's `allocation_request_version`. Returns the status (204 = claimed).
    pub async fn claim(
        &self,
        version: &str,
        consumer: &str,
        allocation_request: &Value,
        project: &str,
        user: &str,
    ) -> (u16, Value) {
        let mut body = allocation_request.clone();
        body["project_id"] = json!(project);
        body["user_id"] = json!(user);
        body["consumer_generation"] = Value::Null;
        self.call_at(
            version,
            Method::PUT,
            &format!("/allocations/{consumer}"),
            Some(body),
        )
        .await
    }

    /// `POST /reshaper` at 1.30, as a service (Placement's policy for it is the
    /// service role).
    pub async fn reshape(&self, body: Value) -> (u16, Value) {
        self.call_as(
            Some("admin,service"),
            "1.30",
            Method::POST,
            "/reshaper",
            Some(body),
        )
        .await
    }

    /// `DELETE /resource_providers/{rp}`, which must succeed.
    pub async fn delete_provider(&self, rp: &str) {
        let (s, body) = self
            .call(Method::DELETE, &format!("/resource_providers/{rp}"), None)
            .await;
        assert_eq!(s, 204, "delete provider {rp}: {body}");
    }

    pub async fn delete_allocations(&self, consumer: &str) {
        let (s, body) = self
            .call(Method::DELETE, &format!("/allocations/{consumer}"), None)
            .await;
        assert!(s == 204 || s == 404, "delete {consumer}: {s} {body}");
    }
}
