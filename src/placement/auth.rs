// SPDX-License-Identifier: Apache-2.0
//! Credentials for Placement as keystoneauth's plugins give them: none, a fixed admin
//! token, or a keystone v3 token (by password, by an existing token, or by an
//! application credential) with the Placement endpoint taken from its catalog.

use super::PlacementError;
use crate::config::sections::PlacementSection;
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};
use std::fmt;
use tokio::sync::Mutex;

/// keystoneauth's `BaseIdentityPlugin.MIN_TOKEN_LIFE_SECONDS`: a token with less
/// than this left is renewed before it is used.
pub const MIN_TOKEN_LIFE_SECS: i64 = 120;

/// `[placement] auth_type` and its options.
// Built once from config; boxing the keystone variants would only make it clumsier.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub enum PlacementAuth {
    /// No token at all (`auth_type` unset / `none`).
    None,
    /// `auth_type = admin_token`: sends `X-Auth-Token: <token>`.
    AdminToken { token: String },
    /// `auth_type = password` / `v3password`: keystone v3 password authentication.
    Password(PasswordAuth),
    /// `auth_type = token` / `v3token`: a token exchanged for a scoped one.
    Token(TokenAuth),
    /// `auth_type = v3applicationcredential`.
    ApplicationCredential(ApplicationCredentialAuth),
}

impl fmt::Debug for PlacementAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlacementAuth::None => f.write_str("None"),
            PlacementAuth::AdminToken { .. } => {
                f.debug_struct("AdminToken").field("token", &"***").finish()
            }
            PlacementAuth::Password(p) => f.debug_tuple("Password").field(p).finish(),
            PlacementAuth::Token(t) => f
                .debug_struct("Token")
                .field("auth_url", &t.auth_url)
                .field("token", &"***")
                .field("scope", &t.scope)
                .finish(),
            PlacementAuth::ApplicationCredential(a) => f
                .debug_struct("ApplicationCredential")
                .field("auth_url", &a.auth_url)
                .field("id", &a.id)
                .field("name", &a.name)
                .field("secret", &"***")
                .field("user_id", &a.user_id)
                .field("username", &a.username)
                .finish_non_exhaustive(),
        }
    }
}

/// What a keystone token is scoped to (keystoneauth's v3 loader options). At most
/// one target may be given; keystoneauth refuses more.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scope {
    pub project_id: Option<String>,
    pub project_name: Option<String>,
    pub project_domain_id: Option<String>,
    pub project_domain_name: Option<String>,
    pub domain_id: Option<String>,
    pub domain_name: Option<String>,
    pub trust_id: Option<String>,
    /// `all` (the only system scope keystone has).
    pub system_scope: Option<String>,
}

impl Scope {
    /// The request's `scope`, in keystoneauth's order of preference (domain,
    /// project, trust, system); `None` for an unscoped (or default-project) token.
    fn to_json(&self) -> Option<Value> {
        if let Some(id) = &self.domain_id {
            return Some(json!({"domain": {"id": id}}));
        }
        if let Some(name) = &self.domain_name {
            return Some(json!({"domain": {"name": name}}));
        }
        if let Some(id) = &self.project_id {
            return Some(json!({"project": {"id": id}}));
        }
        if let Some(name) = &self.project_name {
            let mut project = json!({ "name": name });
            match (&self.project_domain_id, &self.project_domain_name) {
                (Some(id), _) => project["domain"] = json!({ "id": id }),
                (None, Some(name)) => project["domain"] = json!({ "name": name }),
                (None, None) => {}
            }
            return Some(json!({ "project": project }));
        }
        if let Some(id) = &self.trust_id {
            return Some(json!({"OS-TRUST:trust": {"id": id}}));
        }
        match self.system_scope.as_deref() {
            Some("all") => Some(json!({"system": {"all": true}})),
            _ => None,
        }
    }

    /// keystoneauth's refusals: several targets, or a system scope other than `all`.
    fn check(&self) -> Result<(), String> {
        let targets = [
            self.project_id.is_some() || self.project_name.is_some(),
            self.domain_id.is_some() || self.domain_name.is_some(),
            self.trust_id.is_some(),
            self.system_scope.is_some(),
        ];
        if targets.iter().filter(|t| **t).count() > 1 {
            return Err(
                "authentication cannot be scoped to multiple targets: set only one \
                 of project_id/project_name, domain_id/domain_name, trust_id, system_scope"
                    .into(),
            );
        }
        match self.system_scope.as_deref() {
            Some(other) if other != "all" => Err(format!(
                "system_scope = {other} is not a system scope keystone has (only all)"
            )),
            _ => Ok(()),
        }
    }
}

/// keystoneauth's `password` (generic) and `v3password` plugin options.
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
    /// `system_scope` (`all`).
    pub system_scope: Option<String>,
    /// `domain_id` / `domain_name`: a domain-scoped token.
    pub domain_id: Option<String>,
    pub domain_name: Option<String>,
    /// `trust_id`: a trust-scoped token.
    pub trust_id: Option<String>,
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

/// keystoneauth's `token` / `v3token` plugin: an existing token (`token`) exchanged
/// for one with the configured scope. It works as long as that token is valid.
#[derive(Clone, Default)]
pub struct TokenAuth {
    pub auth_url: String,
    pub token: String,
    pub scope: Scope,
}

/// keystoneauth's `v3applicationcredential` plugin: by `id` and `secret`, or by
/// `name` and `secret` with the owner (`user_id`, or `username` and its domain).
#[derive(Clone, Default)]
pub struct ApplicationCredentialAuth {
    pub auth_url: String,
    pub id: Option<String>,
    pub name: Option<String>,
    pub secret: String,
    pub user_id: Option<String>,
    pub username: Option<String>,
    pub user_domain_id: Option<String>,
    pub user_domain_name: Option<String>,
    /// keystone scopes the token to the credential's project; a scope given here
    /// must name that project.
    pub scope: Scope,
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
        if let Some(scope) = self.scope().to_json() {
            auth["scope"] = scope;
        }
        json!({ "auth": auth })
    }

    /// The scope, the project's domain defaulting to the default domain (generic plugin).
    fn scope(&self) -> Scope {
        let (project_domain_id, project_domain_name) =
            match (&self.project_domain_id, &self.project_domain_name) {
                (None, None) => (
                    self.default_domain_id.clone(),
                    self.default_domain_name.clone(),
                ),
                (id, name) => (id.clone(), name.clone()),
            };
        Scope {
            project_id: self.project_id.clone(),
            project_name: self.project_name.clone(),
            project_domain_id,
            project_domain_name,
            domain_id: self.domain_id.clone(),
            domain_name: self.domain_name.clone(),
            trust_id: self.trust_id.clone(),
            system_scope: self.system_scope.clone(),
        }
    }

    /// `<auth_url>/v3/auth/tokens` (no version discovery: v3 is assumed).
    fn tokens_url(&self) -> String {
        tokens_url(&self.auth_url)
    }
}

impl TokenAuth {
    fn token_request(&self) -> Value {
        let mut auth = json!({"identity": {"methods": ["token"], "token": {"id": self.token}}});
        if let Some(scope) = self.scope.to_json() {
            auth["scope"] = scope;
        }
        json!({ "auth": auth })
    }
}

impl ApplicationCredentialAuth {
    fn token_request(&self) -> Value {
        let mut credential = Map::new();
        credential.insert("secret".into(), json!(self.secret));
        if let Some(id) = &self.id {
            credential.insert("id".into(), json!(id));
        } else {
            credential.insert("name".into(), json!(self.name.clone().unwrap_or_default()));
            let mut user = Map::new();
            if let Some(id) = &self.user_id {
                user.insert("id".into(), json!(id));
            } else if let Some(name) = &self.username {
                user.insert("name".into(), json!(name));
                match (&self.user_domain_id, &self.user_domain_name) {
                    (Some(id), _) => {
                        user.insert("domain".into(), json!({ "id": id }));
                    }
                    (None, Some(name)) => {
                        user.insert("domain".into(), json!({ "name": name }));
                    }
                    (None, None) => {}
                }
            }
            credential.insert("user".into(), Value::Object(user));
        }
        let mut auth = json!({"identity": {"methods": ["application_credential"],
            "application_credential": credential}});
        if let Some(scope) = self.scope.to_json() {
            auth["scope"] = scope;
        }
        json!({ "auth": auth })
    }
}

/// `<auth_url>/v3/auth/tokens` (no version discovery: v3 is assumed).
fn tokens_url(auth_url: &str) -> String {
    let base = auth_url.trim_end_matches('/');
    if base.ends_with("/v3") {
        format!("{base}/auth/tokens")
    } else {
        format!("{base}/v3/auth/tokens")
    }
}

// === impl PlacementAuth ===

impl PlacementAuth {
    /// The plugin `[placement]` (or its `auth_section`) configures, refusing what
    /// keystoneauth's loaders refuse and what cannot work. Pure: reads no file and
    /// connects nowhere.
    pub fn from_section(p: &PlacementSection) -> Result<PlacementAuth, PlacementError> {
        let auth_type = p
            .auth_type
            .as_deref()
            .unwrap_or("none")
            .to_ascii_lowercase();
        let bad = |what: String| PlacementError::Config(format!("auth_type = {auth_type} {what}"));
        let secret = |s: &Option<crate::config::Secret>| s.as_ref().map(|s| s.expose().to_string());
        let auth_url = || {
            p.auth_url
                .clone()
                .ok_or_else(|| bad("needs auth_url".into()))
        };
        let scope = Scope {
            project_id: p.project_id.clone(),
            project_name: p.project_name.clone(),
            project_domain_id: p.project_domain_id.clone(),
            project_domain_name: p.project_domain_name.clone(),
            domain_id: p.domain_id.clone(),
            domain_name: p.domain_name.clone(),
            trust_id: p.trust_id.clone(),
            system_scope: p.system_scope.clone(),
        };
        // keystoneauth's `_assert_identity_options`: a user name is unique only in a domain.
        let user_domain_given = p.user_domain_id.is_some() || p.user_domain_name.is_some();
        let auth = match auth_type.as_str() {
            "none" | "noauth" => PlacementAuth::None,
            "admin_token" => PlacementAuth::AdminToken {
                token: secret(&p.token).ok_or_else(|| bad("needs token".into()))?,
            },
            "password" | "v3password" => {
                let generic = auth_type == "password";
                let domain_known = user_domain_given
                    || (generic
                        && (p.default_domain_id.is_some() || p.default_domain_name.is_some()));
                if p.user_id.is_none() && p.username.is_none() {
                    return Err(bad("needs user_id or username".into()));
                }
                if p.user_id.is_none() && !domain_known {
                    return Err(bad(format!(
                        "needs user_domain_id or user_domain_name{} with username (a user \
                         name is unique only within a domain)",
                        if generic {
                            " (or default_domain_*)"
                        } else {
                            ""
                        }
                    )));
                }
                let password = PasswordAuth {
                    auth_url: auth_url()?,
                    username: p.username.clone(),
                    user_id: p.user_id.clone(),
                    password: secret(&p.password).ok_or_else(|| bad("needs password".into()))?,
                    user_domain_name: p.user_domain_name.clone(),
                    user_domain_id: p.user_domain_id.clone(),
                    project_name: p.project_name.clone(),
                    project_id: p.project_id.clone(),
                    project_domain_name: p.project_domain_name.clone(),
                    project_domain_id: p.project_domain_id.clone(),
                    default_domain_name: p.default_domain_name.clone(),
                    default_domain_id: p.default_domain_id.clone(),
                    system_scope: p.system_scope.clone(),
                    domain_id: p.domain_id.clone(),
                    domain_name: p.domain_name.clone(),
                    trust_id: p.trust_id.clone(),
                };
                password.scope().check().map_err(bad)?;
                PlacementAuth::Password(password)
            }
            "token" | "v3token" => {
                scope.check().map_err(bad)?;
                PlacementAuth::Token(TokenAuth {
                    auth_url: auth_url()?,
                    token: secret(&p.token).ok_or_else(|| bad("needs token".into()))?,
                    scope,
                })
            }
            "v3applicationcredential" => {
                let secret = secret(&p.application_credential_secret)
                    .ok_or_else(|| bad("needs application_credential_secret".into()))?;
                let (id, name) = (
                    p.application_credential_id.clone(),
                    p.application_credential_name.clone(),
                );
                if id.is_none() && name.is_none() {
                    return Err(bad(
                        "needs application_credential_id, or application_credential_name \
                         and its user"
                            .into(),
                    ));
                }
                if id.is_none() && p.user_id.is_none() && p.username.is_none() {
                    return Err(bad(
                        "needs user_id or username with application_credential_name".into(),
                    ));
                }
                if p.username.is_some() && !user_domain_given {
                    return Err(bad(
                        "needs user_domain_id or user_domain_name with username (a user \
                         name is unique only within a domain)"
                            .into(),
                    ));
                }
                scope.check().map_err(bad)?;
                PlacementAuth::ApplicationCredential(ApplicationCredentialAuth {
                    auth_url: auth_url()?,
                    id,
                    name,
                    secret,
                    user_id: p.user_id.clone(),
                    username: p.username.clone(),
                    user_domain_id: p.user_domain_id.clone(),
                    user_domain_name: p.user_domain_name.clone(),
                    scope,
                })
            }
            other => {
                return Err(PlacementError::Config(format!(
                    "auth_type = {other} is not supported (use none, admin_token, password, \
                     v3password, token, v3token or v3applicationcredential)"
                )))
            }
        };
        Ok(auth)
    }

    /// Plugin name for messages.
    fn plugin(&self) -> &'static str {
        match self {
            PlacementAuth::None => "none",
            PlacementAuth::AdminToken { .. } => "admin_token",
            PlacementAuth::Password(_) => "password",
            PlacementAuth::Token(_) => "token",
            PlacementAuth::ApplicationCredential(_) => "v3applicationcredential",
        }
    }

    /// keystone's tokens URL and request body, for the plugins that ask keystone.
    fn keystone_request(&self) -> Option<(String, Value)> {
        match self {
            PlacementAuth::None | PlacementAuth::AdminToken { .. } => None,
            PlacementAuth::Password(p) => Some((p.tokens_url(), p.token_request())),
            PlacementAuth::Token(t) => Some((tokens_url(&t.auth_url), t.token_request())),
            PlacementAuth::ApplicationCredential(a) => {
                Some((tokens_url(&a.auth_url), a.token_request()))
            }
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
        if endpoint_override.is_none() && auth.keystone_request().is_none() {
            return Err(PlacementError::Config(format!(
                "auth_type = {} needs an endpoint (endpoint_override or endpoint): only \
                 keystone's catalog could name one",
                auth.plugin()
            )));
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
        self.auth.keystone_request().is_some()
    }

    /// Forgets the cached token (after a 401).
    pub async fn invalidate(&self) {
        *self.cache.lock().await = None;
    }

    pub async fn credentials(&self, http: &reqwest::Client) -> Result<Credentials, PlacementError> {
        let request = match &self.auth {
            PlacementAuth::None => return Ok(self.fixed(None)),
            PlacementAuth::AdminToken { token } => return Ok(self.fixed(Some(token.clone()))),
            keystone => keystone.keystone_request(),
        };
        let Some((url, body)) = request else {
            return Ok(self.fixed(None));
        };
        let mut cache = self.cache.lock().await;
        let fresh = cache.as_ref().is_some_and(|c| {
            c.expires_at
                .is_none_or(|t| (t - Utc::now()).num_seconds() > MIN_TOKEN_LIFE_SECS)
        });
        if !fresh {
            *cache = Some(self.issue_token(http, &url, &body).await?);
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
        url: &str,
        body: &Value,
    ) -> Result<CachedToken, PlacementError> {
        let resp =
            http.post(url).json(body).send().await.map_err(|e| {
                PlacementError::Unreachable(format!("keystone: {}", transport_text(e)))
            })?;
        let status = resp.status();
        let token = resp
            .headers()
            .get("X-Subject-Token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = resp.text().await.unwrap_or_default();
        if status.as_u16() == 401 {
            // keystone's own message says which part it refused; it never echoes a secret.
            return Err(PlacementError::Unauthorized(format!(
                "keystone refused the {} credentials at {url}: 401 {}",
                self.auth.plugin(),
                keystone_message(&body)
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
        tracing::debug!(%endpoint, ?expires_at, plugin = self.auth.plugin(),
            "authenticated to keystone for Placement");
        Ok(CachedToken {
            token,
            expires_at,
            endpoint,
        })
    }
}

/// keystone's `{"error": {"message": ...}}`, else the body's start.
fn keystone_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| truncate(body))
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

    fn section(text: &str) -> PlacementSection {
        crate::config::from_ini_str(&format!("[placement]\n{text}"))
            .expect("config")
            .placement
    }

    fn refusal(text: &str) -> String {
        match PlacementAuth::from_section(&section(text)) {
            Err(e) => e.to_string(),
            Ok(a) => panic!("accepted: {a:?}"),
        }
    }

    #[test]
    fn application_credential_by_id_and_by_name_as_keystoneauth_sends_it() {
        let by_id = PlacementAuth::from_section(&section(
            "auth_type = v3applicationcredential\nauth_url = http://ks/v3\n\
             application_credential_id = ac1\napplication_credential_secret = s3cr3t\n",
        ))
        .expect("by id");
        let (url, body) = by_id.keystone_request().expect("keystone");
        assert_eq!(url, "http://ks/v3/auth/tokens");
        assert_eq!(
            body,
            json!({"auth": {"identity": {"methods": ["application_credential"],
                "application_credential": {"id": "ac1", "secret": "s3cr3t"}}}})
        );
        assert!(!format!("{by_id:?}").contains("s3cr3t"));
        let by_name = PlacementAuth::from_section(&section(
            "auth_type = v3applicationcredential\nauth_url = http://ks\n\
             application_credential_name = nsrs\napplication_credential_secret = x\n\
             username = nova\nuser_domain_name = Default\n",
        ))
        .expect("by name");
        assert_eq!(
            by_name.keystone_request().expect("keystone").1["auth"]["identity"]
                ["application_credential"],
            json!({"name": "nsrs", "secret": "x",
                "user": {"name": "nova", "domain": {"name": "Default"}}})
        );
        let ac = "auth_type = v3applicationcredential\nauth_url = http://ks\n";
        assert!(refusal(ac).contains("application_credential_secret"));
        assert!(refusal(&format!("{ac}application_credential_secret = x\n"))
            .contains("application_credential_id"));
        assert!(refusal(&format!(
            "{ac}application_credential_secret = x\napplication_credential_name = n\n"
        ))
        .contains("user_id or username"));
        assert!(refusal(&format!(
            "{ac}application_credential_secret = x\napplication_credential_name = n\n\
             username = nova\n"
        ))
        .contains("user_domain_id"));
        let no_url = refusal(
            "auth_type = v3applicationcredential\napplication_credential_id = a\n\
             application_credential_secret = x\n",
        );
        assert!(
            no_url.contains("auth_url") && !no_url.contains("x\n"),
            "{no_url}"
        );
    }

    #[test]
    fn token_plugin_scopes_and_the_refusals_of_keystoneauth() {
        let token = PlacementAuth::from_section(&section(
            "auth_type = v3token\nauth_url = http://ks\ntoken = t0k\ndomain_name = D\n",
        ))
        .expect("token");
        assert_eq!(
            token.keystone_request().expect("keystone").1,
            json!({"auth": {"identity": {"methods": ["token"], "token": {"id": "t0k"}},
                "scope": {"domain": {"name": "D"}}}})
        );
        let trust = PlacementAuth::from_section(&section(
            "auth_type = password\nauth_url = http://ks\nuser_id = u\npassword = p\n\
             trust_id = tr\n",
        ))
        .expect("trust");
        assert_eq!(
            trust.keystone_request().expect("keystone").1["auth"]["scope"],
            json!({"OS-TRUST:trust": {"id": "tr"}})
        );
        assert!(refusal(
            "auth_type = password\nauth_url = http://ks\nuser_id = u\npassword = p\n\
             project_id = p1\nsystem_scope = all\n"
        )
        .contains("multiple targets"));
        assert!(refusal(
            "auth_type = v3password\nauth_url = http://ks\nusername = u\npassword = p\n"
        )
        .contains("user_domain_id"));
        assert!(
            refusal("auth_type = v3password\nauth_url = http://ks\nuser_id = u\n")
                .contains("needs password")
        );
        assert!(refusal("auth_type = token\nauth_url = http://ks\n").contains("needs token"));
        assert!(refusal("auth_type = v3oidcpassword\n").contains("not supported"));
    }

    #[test]
    fn keystone_refusal_names_keystone_message() {
        assert_eq!(
            keystone_message(
                r#"{"error": {"code": 401, "title": "Unauthorized",
                "message": "The request you have made requires authentication."}}"#
            ),
            "The request you have made requires authentication."
        );
        assert_eq!(keystone_message("gateway says no"), "gateway says no");
    }
}
