// SPDX-License-Identifier: Apache-2.0
//! Credentials for Placement: none, a fixed admin token, or a keystone v3 password
//! token with the Placement endpoint taken from its catalog.

use super::PlacementError;
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};
use std::fmt;
use tokio::sync::Mutex;

/// A token is renewed when it has less than this left (keystoneauth uses 120 s).
const MIN_TOKEN_LIFE_SECS: i64 = 120;

/// `[placement] auth_type` and its options.
// Built once from config; boxing the password variant would only make it clumsier.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub enum PlacementAuth {
    /// No token at all (`auth_type` unset / `none`).
    None,
    /// `auth_type = admin_token`: sends `X-Auth-Token: <token>`.
    AdminToken { token: String },
    /// `auth_type = password`: keystone v3 password authentication.
    Password(PasswordAuth),
}

impl fmt::Debug for PlacementAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlacementAuth::None => f.write_str("None"),
            PlacementAuth::AdminToken { .. } => {
                f.debug_struct("AdminToken").field("token", &"***").finish()
            }
            PlacementAuth::Password(p) => f.debug_tuple("Password").field(p).finish(),
        }
    }
}

/// keystoneauth's `password` plugin options (v3 only).
#[derive(Clone, Default)]
pub struct PasswordAuth {
    /// `auth_url`, with or without the trailing `/v3`.
    pub auth_url: String,
    pub username: Option<String>,
    pub user_id: Option<String>,
    pub password: String,
    pub user_domain_name: Option<String>,
    pub user_domain_id: Option<String>,
    pub project_name: Option<String>,
    pub project_id: Option<String>,
    pub project_domain_name: Option<String>,
    pub project_domain_id: Option<String>,
    /// Used for the user and project domains when theirs are not given.
    pub default_domain_name: Option<String>,
    pub default_domain_id: Option<String>,
    /// `system_scope` (`all`), used when no project is given.
    pub system_scope: Option<String>,
}

impl fmt::Debug for PasswordAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PasswordAuth")
            .field("auth_url", &self.auth_url)
            .field("username", &self.username)
            .field("user_id", &self.user_id)
            .field("password", &"***")
            .field("user_domain_name", &self.user_domain_name)
            .field("user_domain_id", &self.user_domain_id)
            .field("project_name", &self.project_name)
            .field("project_id", &self.project_id)
            .field("project_domain_name", &self.project_domain_name)
            .field("project_domain_id", &self.project_domain_id)
            .field("system_scope", &self.system_scope)
            .finish_non_exhaustive()
    }
}

impl PasswordAuth {
    /// `POST /v3/auth/tokens` body.
    fn token_request(&self) -> Value {
        let mut user = Map::new();
        match (&self.user_id, &self.username) {
            (Some(id), _) => {
                user.insert("id".into(), json!(id));
            }
            (None, name) => {
                user.insert("name".into(), json!(name.clone().unwrap_or_default()));
                if let Some(domain) = domain(&self.user_domain_id, &self.user_domain_name, self) {
                    user.insert("domain".into(), domain);
                }
            }
        }
        user.insert("password".into(), json!(self.password));
        let mut auth = json!({"identity": {"methods": ["password"], "password": {"user": user}}});
        if let Some(scope) = self.scope() {
            auth["scope"] = scope;
        }
        json!({ "auth": auth })
    }

    fn scope(&self) -> Option<Value> {
        if let Some(id) = &self.project_id {
            return Some(json!({"project": {"id": id}}));
        }
        if let Some(name) = &self.project_name {
            let mut project = json!({ "name": name });
            if let Some(d) = domain(&self.project_domain_id, &self.project_domain_name, self) {
                project["domain"] = d;
            }
            return Some(json!({ "project": project }));
        }
        match self.system_scope.as_deref() {
            Some("all") => Some(json!({"system": {"all": true}})),
            _ => None,
        }
    }

    /// `<auth_url>/v3/auth/tokens` (no version discovery: v3 is assumed).
    fn tokens_url(&self) -> String {
        let base = self.auth_url.trim_end_matches('/');
        if base.ends_with("/v3") {
            format!("{base}/auth/tokens")
        } else {
            format!("{base}/v3/auth/tokens")
        }
    }
}

/// The explicit domain (id first), else the default domain (id first).
fn domain(id: &Option<String>, name: &Option<String>, p: &PasswordAuth) -> Option<Value> {
    let pick = |id: &Option<String>, name: &Option<String>| match (id, name) {
        (Some(id), _) => Some(json!({ "id": id })),
        (None, Some(name)) => Some(json!({ "name": name })),
        (None, None) => None,
    };
    pick(id, name).or_else(|| pick(&p.default_domain_id, &p.default_domain_name))
}

/// A token and the endpoint to use it with.
pub(super) struct Credentials {
    pub token: Option<String>,
    pub endpoint: String,
}

struct CachedToken {
    token: String,
    expires_at: Option<DateTime<Utc>>,
    endpoint: String,
}

/// Hands out credentials, authenticating against keystone when needed.
pub(super) struct Authenticator {
    auth: PlacementAuth,
    endpoint_override: Option<String>,
    catalog: CatalogFilter,
    cache: Mutex<Option<CachedToken>>,
}

// === impl Authenticator ===

impl Authenticator {
    pub fn new(
        auth: PlacementAuth,
        endpoint_override: Option<String>,
        catalog: CatalogFilter,
    ) -> Result<Self, PlacementError> {
        if endpoint_override.is_none() && !matches!(auth, PlacementAuth::Password(_)) {
            return Err(PlacementError::Config(
                "an endpoint (endpoint_override) is required without password authentication"
                    .into(),
            ));
        }
        Ok(Authenticator {
            auth,
            endpoint_override: endpoint_override.map(|e| e.trim_end_matches('/').to_string()),
            catalog,
            cache: Mutex::new(None),
        })
    }

    /// True when a 401 may be cured by authenticating again.
    pub fn can_reauthenticate(&self) -> bool {
        matches!(self.auth, PlacementAuth::Password(_))
    }

    /// Forgets the cached token (after a 401).
    pub async fn invalidate(&self) {
        *self.cache.lock().await = None;
    }

    pub async fn credentials(&self, http: &reqwest::Client) -> Result<Credentials, PlacementError> {
        let password = match &self.auth {
            PlacementAuth::None => return Ok(self.fixed(None)),
            PlacementAuth::AdminToken { token } => return Ok(self.fixed(Some(token.clone()))),
            PlacementAuth::Password(p) => p,
        };
        let mut cache = self.cache.lock().await;
        let fresh = cache.as_ref().is_some_and(|c| {
            c.expires_at
                .is_none_or(|t| (t - Utc::now()).num_seconds() > MIN_TOKEN_LIFE_SECS)
        });
        if !fresh {
            *cache = Some(self.issue_token(http, password).await?);
        }
        let cached = cache
            .as_ref()
            .ok_or_else(|| PlacementError::Unauthorized("no token after authentication".into()))?;
        Ok(Credentials {
            token: Some(cached.token.clone()),
            endpoint: cached.endpoint.clone(),
        })
    }

    fn fixed(&self, token: Option<String>) -> Credentials {
        Credentials {
            token,
            endpoint: self.endpoint_override.clone().unwrap_or_default(),
        }
    }

    async fn issue_token(
        &self,
        http: &reqwest::Client,
        p: &PasswordAuth,
    ) -> Result<CachedToken, PlacementError> {
        let url = p.tokens_url();
        let resp = http
            .post(&url)
            .json(&p.token_request())
            .send()
            .await
            .map_err(|e| PlacementError::Unreachable(format!("keystone: {}", transport_text(e))))?;
        let status = resp.status();
        let token = resp
            .headers()
            .get("X-Subject-Token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = resp.text().await.unwrap_or_default();
        if status.as_u16() == 401 {
            return Err(PlacementError::Unauthorized(format!(
                "keystone answered 401 at {url}"
            )));
        }
        let (Some(token), true) = (token, status.is_success()) else {
            return Err(PlacementError::BadResponse {
                what: format!("keystone ({url})"),
                detail: format!("HTTP {status} without a token: {}", truncate(&body)),
            });
        };
        let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let expires_at = parsed["token"]["expires_at"]
            .as_str()
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
            .map(|t| t.with_timezone(&Utc));
        let endpoint = match &self.endpoint_override {
            Some(e) => e.clone(),
            None => self
                .catalog
                .select(
                    parsed["token"]["catalog"]
                        .as_array()
                        .map(Vec::as_slice)
                        .unwrap_or(&[]),
                )
                .ok_or_else(|| {
                    let c = &self.catalog;
                    PlacementError::EndpointNotFound(format!(
                        "no '{}' endpoint (name {:?}) with interface {:?} (region {:?}) in the catalog",
                        c.service_type, c.service_name, c.valid_interfaces, c.region_name
                    ))
                })?,
        };
        tracing::debug!(%endpoint, ?expires_at, "authenticated to keystone for Placement");
        Ok(CachedToken {
            token,
            expires_at,
            endpoint,
        })
    }
}

/// How keystoneauth picks the Placement endpoint from a token's catalog:
/// `service_type` (and `service_name` when set), `region_name`, `valid_interfaces`.
#[derive(Debug, Clone)]
pub(super) struct CatalogFilter {
    pub service_type: String,
    pub service_name: Option<String>,
    pub region_name: Option<String>,
    pub valid_interfaces: Vec<String>,
}

impl CatalogFilter {
    /// The first endpoint of the service whose interface comes first in
    /// `valid_interfaces` (`internalURL` style names accepted) and whose region matches.
    pub fn select(&self, catalog: &[Value]) -> Option<String> {
        let endpoints: Vec<&Value> = catalog
            .iter()
            .filter(|s| s["type"].as_str() == Some(self.service_type.as_str()))
            .filter(|s| {
                self.service_name
                    .as_deref()
                    .is_none_or(|n| s["name"].as_str() == Some(n))
            })
            .filter_map(|s| s["endpoints"].as_array())
            .flatten()
            .filter(|e| {
                self.region_name.as_deref().is_none_or(|r| {
                    e["region_id"].as_str() == Some(r) || e["region"].as_str() == Some(r)
                })
            })
            .collect();
        self.valid_interfaces.iter().find_map(|wanted| {
            let wanted = wanted.trim_end_matches("URL");
            endpoints
                .iter()
                .find(|e| e["interface"].as_str() == Some(wanted))
                .and_then(|e| e["url"].as_str())
                .map(|u| u.trim_end_matches('/').to_string())
        })
    }
}

/// A transport error with its causes (`error sending request: client error
/// (Connect): tcp connect error: Connection refused`); reqwest's own text stops at
/// the first. Neither the URL nor any header is included.
pub(super) fn transport_text(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

pub(super) fn truncate(text: &str) -> String {
    const MAX: usize = 512;
    if text.len() <= MAX {
        return text.to_string();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Vec<Value> {
        serde_json::from_value(json!([
            {"type": "identity", "endpoints": [{"interface": "internal", "region_id": "R1", "url": "http://ks"}]},
            {"type": "placement", "endpoints": [
                {"interface": "public", "region_id": "R1", "region": "R1", "url": "http://pub1/"},
                {"interface": "internal", "region_id": "R2", "region": "R2", "url": "http://int2"},
                {"interface": "internal", "region_id": "R1", "region": "R1", "url": "http://int1"},
                {"interface": "admin", "region_id": "R1", "region": "R1", "url": "http://adm1"}
            ]}
        ]))
        .unwrap_or_default()
    }

    fn select_endpoint(c: &[Value], interfaces: &[String], region: Option<&str>) -> Option<String> {
        CatalogFilter {
            service_type: "placement".into(),
            service_name: None,
            region_name: region.map(str::to_string),
            valid_interfaces: interfaces.to_vec(),
        }
        .select(c)
    }

    #[test]
    fn endpoint_by_interface_order_and_region() {
        let ifs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let c = catalog();
        assert_eq!(
            select_endpoint(&c, &ifs(&["internal", "public"]), Some("R1")).as_deref(),
            Some("http://int1")
        );
        assert_eq!(
            select_endpoint(&c, &ifs(&["public", "internal"]), Some("R1")).as_deref(),
            Some("http://pub1")
        );
        assert_eq!(
            select_endpoint(&c, &ifs(&["internal"]), None).as_deref(),
            Some("http://int2")
        );
        assert_eq!(
            select_endpoint(&c, &ifs(&["adminURL"]), Some("R1")).as_deref(),
            Some("http://adm1")
        );
        assert_eq!(select_endpoint(&c, &ifs(&["public"]), Some("R2")), None);
    }

    #[test]
    fn token_request_and_url() {
        let p = PasswordAuth {
            auth_url: "http://ks:5000/".into(),
            username: Some("nova".into()),
            password: "pw".into(),
            user_domain_name: Some("Default".into()),
            project_name: Some("service".into()),
            default_domain_id: Some("default".into()),
            ..PasswordAuth::default()
        };
        assert_eq!(p.tokens_url(), "http://ks:5000/v3/auth/tokens");
        let body = p.token_request();
        assert_eq!(
            body["auth"]["identity"]["password"]["user"]["domain"]["name"],
            "Default"
        );
        assert_eq!(body["auth"]["scope"]["project"]["domain"]["id"], "default");
        let v3 = PasswordAuth {
            auth_url: "http://ks/identity/v3".into(),
            ..PasswordAuth::default()
        };
        assert_eq!(v3.tokens_url(), "http://ks/identity/v3/auth/tokens");
    }

    #[test]
    fn debug_masks_secrets() {
        let a = PlacementAuth::AdminToken {
            token: "s3cr3t".into(),
        };
        let p = PlacementAuth::Password(PasswordAuth {
            password: "hunter2".into(),
            ..PasswordAuth::default()
        });
        let text = format!("{a:?} {p:?}");
        assert!(
            !text.contains("s3cr3t") && !text.contains("hunter2"),
            "{text}"
        );
    }
}
