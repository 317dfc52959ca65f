// SPDX-License-Identifier: Apache-2.0
//! nova's `request_filter.py`: the request filters, run on the RequestSpec in nova's
//! order by [`process`] before the Placement question is asked.
//!
//! Request filters, with the option that enables each (nova's defaults):
//!  1. `require_tenant_aggregate` — `[scheduler] limit_tenants_to_placement_aggregate`
//!     (False), `placement_aggregate_required_for_tenants` (False); API DB
//!  2. `map_az_to_placement_aggregate` — always; API DB
//!  3. `require_image_type_support` — `query_placement_for_image_type_support` (False)
//!  4. `compute_status_filter` — always
//!  5. `isolate_aggregates` — `enable_isolated_aggregate_filtering` (False); API DB
//!  6. `transform_image_metadata` — `image_metadata_prefilter` (False)
//!  7. `accelerators_filter`, 8. `packed_virtqueue_filter` — always
//!  9. `routed_networks_filter` — `query_placement_for_routed_network_aggregates`
//!     (False). Needs Neutron, which this daemon does not talk to: enabling it is
//!     refused at startup ([`PrefilterOptions::check`]).
//! 10. `remote_managed_ports_filter` — always, but asks Neutron about each requested
//!     port. Not done here: a request with ports gets a warning and no
//!     `COMPUTE_REMOTE_MANAGED_PORTS` (nova adds it for remote-managed ports).
//! 11. `ephemeral_encryption_filter`, 12. `virtio_sound_filter` (nova ≥ 32),
//!     13. `tpm_secret_security_filter` (nova ≥ 33) — always
//! 14. `owner_nova_filter` (nova ≥ 34) — always, once every nova-compute is at
//!     version ≥ 73.
//!
//! An older release ([`PrefilterOptions::release`]) runs only the filters it has.//!
//! The filters that read the API database or the cells' service versions do it
//! through a [`RequestFilterSource`]: the daemon's [`HostStateStore`] (one query each,
//! as nova's run per request), or a snapshot for the offline tools, so that both run
//! the one list in [`process`]. Each filter returns `Err` where nova's raises: a
//! `RequestFilterFailed` (answered NoValidHost) or another exception
//! (`FlavorImageConflict`, `Invalid`, ...) that fails the call as in nova.

use crate::hardware::{self, RequestError};
use crate::model::{Destination, ImageMeta, RequestSpec};
use crate::placement::{QueryOptions, ResourceRequest};
use crate::release::{Behaviour, NovaSeries};
use crate::state::{HostStateStore, StateError};
use serde_json::Value;
use std::collections::BTreeSet;
use tracing::{debug, warn};

/// nova 34's minimum compute service version for the `OWNER_NOVA` trait
/// (`MIN_COMPUTE_VERSION_OWNER_TRAIT`).
pub const OWNER_NOVA_MIN_COMPUTE_VERSION: i64 = 73;

/// nova's `ALL_REQUEST_FILTERS`, in its order, with the behaviour that brought each
/// one in after nova 29 (`None`: every release has it). [`process`] runs them.
pub const REQUEST_FILTERS: &[(&str, Option<Behaviour>)] = &[
    ("require_tenant_aggregate", None),
    ("map_az_to_placement_aggregate", None),
    ("require_image_type_support", None),
    ("compute_status_filter", None),
    ("isolate_aggregates", None),
    ("transform_image_metadata", None),
    ("accelerators_filter", None),
    ("packed_virtqueue_filter", None),
    ("routed_networks_filter", None),
    ("remote_managed_ports_filter", None),
    ("ephemeral_encryption_filter", None),
    ("virtio_sound_filter", Some(Behaviour::VirtioSoundFilter)),
    (
        "tpm_secret_security_filter",
        Some(Behaviour::TpmSecretSecurityFilter),
    ),
    ("owner_nova_filter", Some(Behaviour::OwnerNovaFilter)),
];

/// Whether `release`'s nova has the request filter `name` (one of [`REQUEST_FILTERS`]).
pub fn in_release(name: &str, release: NovaSeries) -> bool {
    let (_, since) = REQUEST_FILTERS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("{name} is not in REQUEST_FILTERS"));
    since.is_none_or(|b| release.has(b))
}
/// nova's `TENANT_METADATA_KEY`.
const TENANT_METADATA_KEY: &str = "filter_tenant_id";

/// The `[scheduler]` / `[workarounds]` options of the request filters and queries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrefilterOptions {
    pub limit_tenants_to_placement_aggregate: bool,
    pub placement_aggregate_required_for_tenants: bool,
    pub query_placement_for_image_type_support: bool,
    pub enable_isolated_aggregate_filtering: bool,
    pub image_metadata_prefilter: bool,
    pub query_placement_for_routed_network_aggregates: bool,
    /// `[workarounds] disable_fallback_pcpu_query`.
    pub disable_fallback_pcpu_query: bool,
    /// The nova release whose request filters run.
    pub release: NovaSeries,
}

impl PrefilterOptions {
    /// Options this daemon cannot honour: refused at startup rather than deciding
    /// differently from nova.
    pub fn check(&self) -> Result<(), String> {
        if self.query_placement_for_routed_network_aggregates {
            return Err(
                "[scheduler] query_placement_for_routed_network_aggregates = True needs \
                        Neutron segment lookups, which nova-scheduler-rs does not do; run \
                        nova-scheduler for routed networks"
                    .into(),
            );
        }
        Ok(())
    }
}

/// Why the request stops before the filters run.
#[derive(Debug, thiserror::Error)]
pub enum PrefilterError {
    /// Answered as nova's `NoValidHost(reason)`.
    #[error("No valid host was found. {0}")]
    NoValidHost(String),
    /// A nova exception that fails the call as it is (class, text, code).
    #[error("{0}")]
    Nova(RequestError),
    /// The API database did not answer (nova would raise the DB error).
    #[error("{0}")]
    Database(String),
}

impl From<RequestFailure> for PrefilterError {
    fn from(f: RequestFailure) -> Self {
        match f {
            RequestFailure::Filter(_) => PrefilterError::NoValidHost(f.to_string()),
            RequestFailure::Error(e) => e.into(),
        }
    }
}

impl From<RequestError> for PrefilterError {
    fn from(e: RequestError) -> Self {
        if e.class == "NoValidHost" {
            let reason = e
                .message
                .strip_prefix("No valid host was found. ")
                .unwrap_or(&e.message)
                .to_string();
            PrefilterError::NoValidHost(reason)
        } else {
            PrefilterError::Nova(e)
        }
    }
}

pub(super) fn db_error(what: &str, e: impl std::fmt::Display) -> PrefilterError {
    warn!(error = %e, "{what}");
    PrefilterError::Database(format!("{what}: {e}"))
}

/// What the request filters read besides the request.
#[allow(async_fn_in_trait)]
pub trait RequestFilterSource {
    type Error: std::fmt::Display;
    /// Uuids of the aggregates whose `availability_zone` metadata is `az`, by id.
    async fn aggregate_uuids_for_az(&self, az: &str) -> Result<Vec<String>, Self::Error>;
    /// `(aggregate uuid, metadata key)` of the metadata rows whose value is `value`.
    async fn aggregates_with_metadata_value(
        &self,
        value: &str,
    ) -> Result<Vec<(String, String)>, Self::Error>;
    /// Uuids of the aggregates that require (`trait:<T> = required`) a trait whose
    /// key is not among `keys`.
    async fn aggregates_requiring_traits_other_than(
        &self,
        keys: &[String],
    ) -> Result<BTreeSet<String>, Self::Error>;
    /// The minimum version of the live nova-compute services (`None`: none known).
    async fn min_compute_service_version(&self) -> Option<i64>;
}

impl RequestFilterSource for HostStateStore {
    type Error = StateError;

    async fn aggregate_uuids_for_az(&self, az: &str) -> Result<Vec<String>, StateError> {
        HostStateStore::aggregate_uuids_for_az(self, az).await
    }

    async fn aggregates_with_metadata_value(
        &self,
        value: &str,
    ) -> Result<Vec<(String, String)>, StateError> {
        HostStateStore::aggregates_with_metadata_value(self, value).await
    }

    async fn aggregates_requiring_traits_other_than(
        &self,
        keys: &[String],
    ) -> Result<BTreeSet<String>, StateError> {
        HostStateStore::aggregates_requiring_traits_other_than(self, keys).await
    }

    async fn min_compute_service_version(&self) -> Option<i64> {
        HostStateStore::min_compute_service_version(self).await
    }
}

/// nova's `process_reqspec`: every request filter, in order, on the spec.
pub async fn process<S: RequestFilterSource>(
    spec: &mut RequestSpec,
    store: &S,
    opts: &PrefilterOptions,
) -> Result<(), PrefilterError> {
    require_tenant_aggregate(spec, store, opts).await?;
    map_az_to_placement_aggregate(spec, store).await?;
    require_image_type_support(spec, opts.query_placement_for_image_type_support);
    compute_status_filter(spec);
    isolate_aggregates(spec, store, opts).await?;
    transform_image_metadata(spec, opts.image_metadata_prefilter);
    accelerators_filter(spec);
    packed_virtqueue_filter(spec)?;
    // routed_networks_filter: refused at startup when enabled (PrefilterOptions::check).
    remote_managed_ports_filter(spec);
    ephemeral_encryption_filter(spec)?;
    // Each release runs the filters it has.
    if in_release("virtio_sound_filter", opts.release) {
        virtio_sound_filter(spec)?;
    }
    if in_release("tpm_secret_security_filter", opts.release) {
        tpm_secret_security_filter(spec)?;
    }
    if in_release("owner_nova_filter", opts.release) {
        owner_nova_filter(spec, store).await;
    }
    Ok(())
}

fn destination(spec: &mut RequestSpec) -> &mut Destination {
    spec.requested_destination
        .get_or_insert_with(Destination::default)
}

/// `require_tenant_aggregate`: aggregates with a `filter_tenant_id*` metadata row
/// whose value is the project (nova's `AggregateList.get_by_metadata(value=...)`
/// loads only the matching rows, then tests the key prefix in Python).
pub async fn require_tenant_aggregate<S: RequestFilterSource>(
    spec: &mut RequestSpec,
    store: &S,
    opts: &PrefilterOptions,
) -> Result<(), PrefilterError> {
    if !opts.limit_tenants_to_placement_aggregate {
        return Ok(());
    }
    let project = spec.project_id.clone().unwrap_or_default();
    let rows = store
        .aggregates_with_metadata_value(&project)
        .await
        .map_err(|e| db_error("could not read tenant aggregates", e))?;
    let uuids: BTreeSet<String> = rows
        .into_iter()
        .filter(|(_, key)| key.starts_with(TENANT_METADATA_KEY))
        .map(|(uuid, _)| uuid)
        .collect();
    if !uuids.is_empty() {
        debug!(aggregates = ?uuids, project = %project, "require_tenant_aggregate request filter added aggregates");
        let joined = uuids.into_iter().collect::<Vec<_>>().join(",");
        destination(spec).aggregates.push(joined);
    } else if opts.placement_aggregate_required_for_tenants {
        warn!(tenant = %project, "Tenant has no available aggregates");
        return Err(PrefilterError::NoValidHost(
            "Scheduling failed: No hosts available for tenant".into(),
        ));
    }
    Ok(())
}

/// `map_az_to_placement_aggregate`: nothing added when no aggregate has the AZ.
pub async fn map_az_to_placement_aggregate<S: RequestFilterSource>(
    spec: &mut RequestSpec,
    store: &S,
) -> Result<(), PrefilterError> {
    let Some(az) = spec.availability_zone.clone().filter(|az| !az.is_empty()) else {
        return Ok(());
    };
    let uuids = store
        .aggregate_uuids_for_az(&az)
        .await
        .map_err(|e| db_error("could not map the availability zone to aggregates", e))?;
    if uuids.is_empty() {
        return Ok(());
    }
    debug!(az = %az, aggregates = ?uuids, "map_az_to_placement_aggregate request filter added aggregates");
    destination(spec).aggregates.push(uuids.join(","));
    Ok(())
}

/// `isolate_aggregates`: forbid aggregates that require (`trait:<T>=required`) a
/// trait the request does not ask for (`AggregateList.get_non_matching_by_metadata_keys`).
pub async fn isolate_aggregates<S: RequestFilterSource>(
    spec: &mut RequestSpec,
    store: &S,
    opts: &PrefilterOptions,
) -> Result<(), PrefilterError> {
    if !opts.enable_isolated_aggregate_filtering {
        return Ok(());
    }
    let required = ResourceRequest::from_request_spec(spec, true, &QueryOptions::default())?
        .all_required_traits();
    let keys: Vec<String> = required.iter().map(|t| format!("trait:{t}")).collect();
    let uuids = store
        .aggregates_requiring_traits_other_than(&keys)
        .await
        .map_err(|e| db_error("could not read isolated aggregates", e))?;
    if !uuids.is_empty() {
        debug!(aggregates = ?uuids, "isolate_aggregates forbids aggregates");
        destination(spec).forbidden_aggregates.extend(uuids);
    }
    Ok(())
}

/// `remote_managed_ports_filter` needs Neutron (`is_remote_managed_port`): not done.
fn remote_managed_ports_filter(spec: &RequestSpec) {
    if spec.requested_networks.iter().any(|n| n.port_id.is_some()) {
        warn!(
            "the request names ports; nova-scheduler-rs cannot ask Neutron whether they are \
               remote-managed, so COMPUTE_REMOTE_MANAGED_PORTS is not required"
        );
    }
}

/// `owner_nova_filter`.
async fn owner_nova_filter<S: RequestFilterSource>(spec: &mut RequestSpec, store: &S) {
    if spec
        .request_level_params
        .root_required
        .contains("OWNER_NOVA")
    {
        return;
    }
    match store.min_compute_service_version().await {
        Some(v) if v >= OWNER_NOVA_MIN_COMPUTE_VERSION => require_owner_nova(spec),
        other => warn!(
            min_version = other.unwrap_or(0),
            need = OWNER_NOVA_MIN_COMPUTE_VERSION,
            "OWNER_NOVA trait not added to scheduling request: not all nova-compute services are upgraded"
        ),
    }
}

/// os-traits 3.x trait names with the prefixes the image prefilters compute; nova
/// tests `hasattr(os_traits, name)` and adds nothing for an unknown name.
const KNOWN_IMAGE_TRAITS: [&str; 86] = [
    "COMPUTE_ARCH_AARCH64",
    "COMPUTE_ARCH_MIPSEL",
    "COMPUTE_ARCH_PPC64LE",
    "COMPUTE_ARCH_RISCV64",
    "COMPUTE_ARCH_S390X",
    "COMPUTE_ARCH_X86_64",
    "COMPUTE_GRAPHICS_MODEL_BOCHS",
    "COMPUTE_GRAPHICS_MODEL_CIRRUS",
    "COMPUTE_GRAPHICS_MODEL_GOP",
    "COMPUTE_GRAPHICS_MODEL_NONE",
    "COMPUTE_GRAPHICS_MODEL_QXL",
    "COMPUTE_GRAPHICS_MODEL_VGA",
    "COMPUTE_GRAPHICS_MODEL_VIRTIO",
    "COMPUTE_GRAPHICS_MODEL_VMVGA",
    "COMPUTE_GRAPHICS_MODEL_XEN",
    "COMPUTE_IMAGE_TYPE_AKI",
    "COMPUTE_IMAGE_TYPE_AMI",
    "COMPUTE_IMAGE_TYPE_ARI",
    "COMPUTE_IMAGE_TYPE_ISO",
    "COMPUTE_IMAGE_TYPE_PLOOP",
    "COMPUTE_IMAGE_TYPE_QCOW2",
    "COMPUTE_IMAGE_TYPE_RAW",
    "COMPUTE_IMAGE_TYPE_VDI",
    "COMPUTE_IMAGE_TYPE_VHD",
    "COMPUTE_IMAGE_TYPE_VHDX",
    "COMPUTE_IMAGE_TYPE_VMDK",
    "COMPUTE_NET_VIF_MODEL_E1000",
    "COMPUTE_NET_VIF_MODEL_E1000E",
    "COMPUTE_NET_VIF_MODEL_IGB",
    "COMPUTE_NET_VIF_MODEL_LAN9118",
    "COMPUTE_NET_VIF_MODEL_NE2K_PCI",
    "COMPUTE_NET_VIF_MODEL_NETFRONT",
    "COMPUTE_NET_VIF_MODEL_PCNET",
    "COMPUTE_NET_VIF_MODEL_RTL8139",
    "COMPUTE_NET_VIF_MODEL_SPAPR_VLAN",
    "COMPUTE_NET_VIF_MODEL_SRIOV",
    "COMPUTE_NET_VIF_MODEL_VIRTIO",
    "COMPUTE_NET_VIF_MODEL_VMXNET",
    "COMPUTE_NET_VIF_MODEL_VMXNET3",
    "COMPUTE_STORAGE_BUS_FDC",
    "COMPUTE_STORAGE_BUS_IDE",
    "COMPUTE_STORAGE_BUS_LXC",
    "COMPUTE_STORAGE_BUS_SATA",
    "COMPUTE_STORAGE_BUS_SCSI",
    "COMPUTE_STORAGE_BUS_UML",
    "COMPUTE_STORAGE_BUS_USB",
    "COMPUTE_STORAGE_BUS_VIRTIO",
    "COMPUTE_STORAGE_BUS_XEN",
    "COMPUTE_VIOMMU_MODEL_AUTO",
    "COMPUTE_VIOMMU_MODEL_INTEL",
    "COMPUTE_VIOMMU_MODEL_SMMUV3",
    "COMPUTE_VIOMMU_MODEL_VIRTIO",
    "HW_ARCH_AARCH64",
    "HW_ARCH_ALPHA",
    "HW_ARCH_ARMV6",
    "HW_ARCH_ARMV7",
    "HW_ARCH_ARMV7B",
    "HW_ARCH_CRIS",
    "HW_ARCH_I686",
    "HW_ARCH_IA64",
    "HW_ARCH_LM32",
    "HW_ARCH_M68K",
    "HW_ARCH_MICROBLAZE",
    "HW_ARCH_MICROBLAZEEL",
    "HW_ARCH_MIPS",
    "HW_ARCH_MIPS64",
    "HW_ARCH_MIPS64EL",
    "HW_ARCH_MIPSEL",
    "HW_ARCH_OPENRISC",
    "HW_ARCH_PARISC",
    "HW_ARCH_PARISC64",
    "HW_ARCH_PPC",
    "HW_ARCH_PPC64",
    "HW_ARCH_PPC64LE",
    "HW_ARCH_PPCEMB",
    "HW_ARCH_PPCLE",
    "HW_ARCH_S390",
    "HW_ARCH_S390X",
    "HW_ARCH_SH4",
    "HW_ARCH_SH4EB",
    "HW_ARCH_SPARC",
    "HW_ARCH_SPARC64",
    "HW_ARCH_UNICORE32",
    "HW_ARCH_X86_64",
    "HW_ARCH_XTENSA",
    "HW_ARCH_XTENSAEB",
];

/// `transform_image_metadata`'s property → trait prefix map, in nova's order.
const IMAGE_METADATA_PREFIXES: [(&str, &str); 7] = [
    ("hw_cdrom_bus", "COMPUTE_STORAGE_BUS"),
    ("hw_disk_bus", "COMPUTE_STORAGE_BUS"),
    ("hw_video_model", "COMPUTE_GRAPHICS_MODEL"),
    ("hw_vif_model", "COMPUTE_NET_VIF_MODEL"),
    ("hw_architecture", "HW_ARCH"),
    ("hw_emulation_architecture", "COMPUTE_ARCH"),
    ("hw_viommu_model", "COMPUTE_VIOMMU"),
];

/// Why a request filter stopped the request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestFailure {
    /// nova's `RequestFilterFailed`; the manager answers
    /// `NoValidHost("Scheduling failed: <reason>")`.
    #[error("Scheduling failed: {0}")]
    Filter(String),
    /// Any other nova exception the filter lets through.
    #[error("{0}")]
    Error(RequestError),
}

impl From<RequestError> for RequestFailure {
    fn from(e: RequestError) -> Self {
        RequestFailure::Error(e)
    }
}

fn image(spec: &RequestSpec) -> ImageMeta {
    spec.image.clone().unwrap_or_default()
}

fn known_trait(name: &str) -> bool {
    KNOWN_IMAGE_TRAITS.contains(&name)
}

/// `require_image_type_support` (`[scheduler] query_placement_for_image_type_support`).
/// Skipped for boot from volume; an image without a disk format adds nothing
/// (nova would fail on the missing attribute).
pub fn require_image_type_support(spec: &mut RequestSpec, enabled: bool) -> bool {
    if !enabled || spec.is_bfv {
        return false;
    }
    let Some(disk_format) = spec.image.as_ref().and_then(|i| i.disk_format.clone()) else {
        tracing::warn!("require_image_type_support: the image has no disk_format");
        return false;
    };
    let name = format!("COMPUTE_IMAGE_TYPE_{}", disk_format.to_uppercase());
    if !known_trait(&name) {
        tracing::error!(trait_name = %name, "Computed trait name is not valid; is os-traits up to date?");
        return false;
    }
    spec.request_level_params.root_required.insert(name);
    true
}

/// `compute_status_filter`: never a compute whose service is disabled.
pub fn compute_status_filter(spec: &mut RequestSpec) -> bool {
    spec.request_level_params
        .root_forbidden
        .insert("COMPUTE_STATUS_DISABLED".into());
    true
}

/// `transform_image_metadata` (`[scheduler] image_metadata_prefilter`): all the
/// computed traits, or none if any of them is unknown to os-traits.
pub fn transform_image_metadata(spec: &mut RequestSpec, enabled: bool) -> bool {
    if !enabled {
        return false;
    }
    let image = image(spec);
    let mut names = Vec::new();
    for (key, prefix) in IMAGE_METADATA_PREFIXES {
        let Some(value) = image.properties.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        let value = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let name = format!("{prefix}_{}", value.replace('-', "_").to_uppercase());
        if !known_trait(&name) {
            tracing::error!(trait_name = %name, "Computed trait name is not valid; is os-traits up to date?");
            return false;
        }
        names.push(name);
    }
    spec.request_level_params.root_required.extend(names);
    true
}

/// `accelerators_filter`: a device profile needs a compute that handles it.
pub fn accelerators_filter(spec: &mut RequestSpec) -> bool {
    if spec
        .flavor
        .extra_specs
        .get("accel:device_profile")
        .is_some_and(|p| !p.is_empty())
    {
        spec.request_level_params
            .root_required
            .insert("COMPUTE_ACCELERATORS".into());
    }
    true
}

/// `packed_virtqueue_filter`.
pub fn packed_virtqueue_filter(spec: &mut RequestSpec) -> Result<bool, RequestFailure> {
    if hardware::packed_virtqueue(&spec.flavor, &image(spec))? {
        spec.request_level_params
            .root_required
            .insert("COMPUTE_NET_VIRTIO_PACKED".into());
    }
    Ok(true)
}

/// `ephemeral_encryption_filter`.
pub fn ephemeral_encryption_filter(spec: &mut RequestSpec) -> Result<bool, RequestFailure> {
    let image = image(spec);
    if !hardware::ephemeral_encryption(&spec.flavor, &image)? {
        return Ok(false);
    }
    spec.request_level_params
        .root_required
        .insert("COMPUTE_EPHEMERAL_ENCRYPTION".into());
    if let Some(format) = hardware::ephemeral_encryption_format(&spec.flavor, &image)? {
        spec.request_level_params.root_required.insert(format!(
            "COMPUTE_EPHEMERAL_ENCRYPTION_{}",
            format.to_uppercase()
        ));
    }
    Ok(true)
}

/// `virtio_sound_filter`.
pub fn virtio_sound_filter(spec: &mut RequestSpec) -> Result<bool, RequestFailure> {
    if hardware::sound_model(&spec.flavor, &image(spec))?.as_deref() != Some("virtio") {
        return Ok(false);
    }
    spec.request_level_params
        .root_required
        .insert("COMPUTE_SOUND_MODEL_VIRTIO".into());
    Ok(true)
}

/// `tpm_secret_security_filter`: only when a vTPM is asked for; the policy is
/// the flavor's `hw:tpm_secret_security` (default `user`).
pub fn tpm_secret_security_filter(spec: &mut RequestSpec) -> Result<bool, RequestFailure> {
    if hardware::vtpm(&spec.flavor, &image(spec))?.is_none() {
        return Ok(false);
    }
    let security = spec
        .flavor
        .extra_specs
        .get("hw:tpm_secret_security")
        .filter(|s| !s.is_empty())
        .cloned()
        .unwrap_or_else(|| "user".into());
    let name = match security.as_str() {
        "user" => "COMPUTE_SECURITY_TPM_SECRET_SECURITY_USER",
        "host" => "COMPUTE_SECURITY_TPM_SECRET_SECURITY_HOST",
        "deployment" => "COMPUTE_SECURITY_TPM_SECRET_SECURITY_DEPLOYMENT",
        other => {
            tracing::warn!("TPM secret security '{other}' is not supported.");
            return Err(RequestFailure::Filter(format!(
                "TPM secret security '{other}' is not supported."
            )));
        }
    };
    spec.request_level_params.root_required.insert(name.into());
    Ok(true)
}

/// The second half of `owner_nova_filter`, once the compute version allows it:
/// `OWNER_NOVA` on the root and on every PCI-in-Placement group (a requested
/// group whose requester id minus its last `-N` is the `request_id` of a PCI
/// request that does not come from a Neutron port).
pub fn require_owner_nova(spec: &mut RequestSpec) {
    spec.request_level_params
        .root_required
        .insert("OWNER_NOVA".into());
    let pci_ids = pci_request_ids(spec);
    if pci_ids.is_empty() {
        return;
    }
    for g in &mut spec.requested_resources {
        let Some(id) = g.requester_id.as_deref().filter(|id| !id.is_empty()) else {
            continue;
        };
        let prefix = id.rsplit_once('-').map_or(id, |(head, _)| head);
        if pci_ids.iter().any(|p| p == prefix) {
            g.required_traits.insert("OWNER_NOVA".into());
        }
    }
}

/// `_get_pci_request_ids`: request ids of the PCI requests made from a flavor alias.
fn pci_request_ids(spec: &RequestSpec) -> Vec<String> {
    let Some(requests) = spec
        .pci_requests
        .as_ref()
        .and_then(|p| p.get("nova_object.data"))
        .and_then(|d| d.get("requests"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    requests
        .iter()
        .filter_map(|r| r.get("nova_object.data"))
        // nova's `source`: a request without `alias_name` comes from a Neutron port.
        .filter(|d| d.get("alias_name").is_some_and(|a| !a.is_null()))
        .filter_map(|d| d.get("request_id").and_then(Value::as_str))
        .filter(|id| !id.is_empty())
        .map(str::to_string)
        .collect()
}

impl PrefilterError {
    /// The RPC failure nova would send for it.
    pub fn into_remote(self) -> crate::rpc::RemoteError {
        use crate::rpc::RemoteError;
        match self {
            PrefilterError::NoValidHost(reason) => RemoteError::no_valid_host(reason),
            PrefilterError::Nova(e) if e.is_builtin() => RemoteError::value_error(e.message),
            PrefilterError::Nova(e) => {
                RemoteError::nova(e.class, e.message.clone(), e.code(), Default::default())
            }
            PrefilterError::Database(m) => RemoteError::runtime_error(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with_image(props: Value) -> RequestSpec {
        RequestSpec {
            image: Some(ImageMeta {
                disk_format: Some("qcow2".into()),
                properties: props.as_object().cloned().unwrap_or_default(),
                ..ImageMeta::default()
            }),
            ..RequestSpec::default()
        }
    }

    #[test]
    fn image_metadata_is_all_or_nothing() {
        let mut s = with_image(json!({"hw_disk_bus": "virtio", "hw_vif_model": "spapr-vlan"}));
        assert!(transform_image_metadata(&mut s, true));
        let want: Vec<&str> = vec![
            "COMPUTE_NET_VIF_MODEL_SPAPR_VLAN",
            "COMPUTE_STORAGE_BUS_VIRTIO",
        ];
        assert_eq!(
            s.request_level_params
                .root_required
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            want
        );
        // `intel` gives COMPUTE_VIOMMU_INTEL, which os-traits does not have.
        let mut s = with_image(json!({"hw_disk_bus": "virtio", "hw_viommu_model": "intel"}));
        assert!(!transform_image_metadata(&mut s, true));
        assert!(s.request_level_params.root_required.is_empty());
    }

    #[test]
    fn image_type_and_tpm_security() {
        let mut s = with_image(json!({}));
        assert!(require_image_type_support(&mut s, true));
        assert!(s
            .request_level_params
            .root_required
            .contains("COMPUTE_IMAGE_TYPE_QCOW2"));
        let mut s = with_image(json!({"hw_tpm_version": "2.0"}));
        s.flavor
            .extra_specs
            .insert("hw:tpm_secret_security".into(), "nope".into());
        assert_eq!(
            tpm_secret_security_filter(&mut s).unwrap_err().to_string(),
            "Scheduling failed: TPM secret security 'nope' is not supported."
        );
    }

    /// A cloud with no aggregates, every nova-compute at `min_compute`.
    struct EmptyCloud {
        min_compute: i64,
    }

    impl RequestFilterSource for EmptyCloud {
        type Error = String;
        async fn aggregate_uuids_for_az(&self, _: &str) -> Result<Vec<String>, String> {
            Ok(Vec::new())
        }
        async fn aggregates_with_metadata_value(
            &self,
            _: &str,
        ) -> Result<Vec<(String, String)>, String> {
            Ok(Vec::new())
        }
        async fn aggregates_requiring_traits_other_than(
            &self,
            _: &[String],
        ) -> Result<BTreeSet<String>, String> {
            Ok(BTreeSet::new())
        }
        async fn min_compute_service_version(&self) -> Option<i64> {
            Some(self.min_compute)
        }
    }

    /// The root traits `process` requires as `release`, for a vTPM, virtio-sound image.
    fn root_required_as(release: NovaSeries) -> BTreeSet<String> {
        let mut spec = with_image(json!({"hw_tpm_version": "2.0", "hw_sound_model": "virtio"}));
        let opts = PrefilterOptions {
            release,
            ..PrefilterOptions::default()
        };
        let cloud = EmptyCloud { min_compute: 74 };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        runtime
            .block_on(process(&mut spec, &cloud, &opts))
            .expect("processed");
        spec.request_level_params.root_required
    }

    #[test]
    fn each_release_runs_the_request_filters_it_has() {
        let added = [
            "COMPUTE_SOUND_MODEL_VIRTIO",
            "COMPUTE_SECURITY_TPM_SECRET_SECURITY_USER",
            "OWNER_NOVA",
        ];
        let has = |release| {
            let traits = root_required_as(release);
            added.map(|t| traits.contains(t))
        };
        assert_eq!(has(NovaSeries::V2025_1), [false, false, false]);
        assert_eq!(has(NovaSeries::V2025_2), [true, false, false]);
        assert_eq!(has(NovaSeries::V2026_1), [true, true, false]);
        assert_eq!(has(NovaSeries::V2026_2), [true, true, true]);
        assert!(REQUEST_FILTERS
            .iter()
            .all(|(n, _)| in_release(n, NovaSeries::NEWEST)));
    }
}
