// SPDX-License-Identifier: Apache-2.0
//! nova's `ResourceRequest` (`nova/scheduler/utils.py`): what a RequestSpec asks of
//! Placement, built exactly as `ResourceRequest.from_request_spec` and
//! `resources_from_request_spec` build it, and sent as `to_querystring` sends it.
//! Pure: the target-node lookup is done by the caller and handed in.
//!
//! In order (each step can only add to what the earlier ones made):
//! 1. `root_required` / `root_forbidden` / `same_subtree` from `request_level_params`
//!    (so the request filters' additions are in);
//! 2. flavor extra specs: `group_policy`, `resources[S]:<RC>=<n>`, `trait[S]:<T>=required|forbidden`
//!    (a suffix `S` makes a granular group whose requester id is `S`);
//! 3. image `traits_required`;
//! 4. CPU pinning (first query only): `dedicated` → `PCPU`, `mixed` → `VCPU` + `PCPU`
//!    from the dedicated or realtime mask, +1 `PCPU` for isolated emulator threads,
//!    `HW_CPU_HYPERTHREADING` from the thread policy;
//! 5. `requested_resources` groups (ports, device profiles, PCI in Placement);
//! 6. flavor `VCPU` / `MEMORY_MB` / `DISK_GB` unless some group already asks for them;
//! 7. memory encryption, vPMEM, vTPM, PCI NUMA `socket`, secure boot, maxphysaddr,
//!    stateless firmware;
//! 8. zero amounts and empty groups removed;
//! 9. destination: `member_of` / forbidden aggregates, `in_tree` or no `limit` for a
//!    target host/node, no `limit` with affinity hints, `group_policy=none` when
//!    groups from outside the flavor would otherwise make Placement answer 400.

use crate::hardware;
pub use crate::hardware::RequestError;
use crate::model::{RequestGroup, RequestSpec};
use crate::placement::query::QueryOptions;
use crate::py::int::PyInt;
use crate::release::Behaviour;
use std::collections::{BTreeMap, BTreeSet};

/// `os_resource_classes.STANDARDS` (os-resource-classes 1.1, as pinned with nova 34).
pub const STANDARD_RESOURCE_CLASSES: [&str; 21] = [
    "VCPU",
    "MEMORY_MB",
    "DISK_GB",
    "PCI_DEVICE",
    "SRIOV_NET_VF",
    "NUMA_SOCKET",
    "NUMA_CORE",
    "NUMA_THREAD",
    "NUMA_MEMORY_MB",
    "IPV4_ADDRESS",
    "VGPU",
    "VGPU_DISPLAY_HEAD",
    "NET_BW_EGR_KILOBIT_PER_SEC",
    "NET_BW_IGR_KILOBIT_PER_SEC",
    "PCPU",
    "MEM_ENCRYPTION_CONTEXT",
    "FPGA",
    "PGPU",
    "NET_PACKET_RATE_KILOPACKET_PER_SEC",
    "NET_PACKET_RATE_EGR_KILOPACKET_PER_SEC",
    "NET_PACKET_RATE_IGR_KILOPACKET_PER_SEC",
];

/// Hints that make nova drop `limit` (affinity needs every candidate).
const UNLIMITED_HINTS: [&str; 3] = ["group", "same_host", "different_host"];

/// A compute node found for a target host/node (`get_compute_nodes_by_host_or_node`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetNode {
    pub uuid: String,
    pub host: String,
    pub hypervisor_hostname: String,
}

/// The host/node/cell a request targets (requested destination, else forced).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: Option<String>,
    pub node: Option<String>,
    pub cell_uuid: Option<String>,
}

/// One request group (`objects.RequestGroup`) as the query needs it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Group {
    pub requester_id: Option<String>,
    pub resources: BTreeMap<String, PyInt>,
    pub required_traits: BTreeSet<String>,
    pub forbidden_traits: BTreeSet<String>,
    pub aggregates: Vec<Vec<String>>,
    pub forbidden_aggregates: BTreeSet<String>,
    pub in_tree: Option<String>,
}

impl Group {
    fn new(requester_id: Option<String>) -> Self {
        Group {
            requester_id,
            ..Group::default()
        }
    }

    fn from_requested(g: &RequestGroup) -> Self {
        Group {
            requester_id: g.requester_id.clone(),
            resources: g
                .resources
                .iter()
                .map(|(rc, n)| (rc.clone(), PyInt::from_i64(*n)))
                .collect(),
            required_traits: g.required_traits.clone(),
            forbidden_traits: g.forbidden_traits.clone(),
            aggregates: g.aggregates.clone(),
            forbidden_aggregates: g.forbidden_aggregates.clone(),
            in_tree: g.in_tree.clone(),
        }
    }

    /// `RequestGroup.add_resource`: unknown classes and amounts that are not
    /// non-negative integers are ignored (nova logs a warning).
    fn add_resource(&mut self, rc: &str, amount: Amount<'_>) {
        if !(rc.starts_with("CUSTOM_") || STANDARD_RESOURCE_CLASSES.contains(&rc)) {
            tracing::warn!(
                resource_class = rc,
                "Received an invalid ResourceClass in extra_specs."
            );
            return;
        }
        let amount = match amount {
            Amount::Text(s) => crate::py::int::int(s).ok(),
            Amount::Int(n) => Some(PyInt::from_i64(n)),
        };
        match amount {
            Some(n) if !n.is_negative() => {
                self.resources.insert(rc.to_string(), n);
            }
            _ => tracing::warn!("Resource amounts must be nonnegative integers."),
        }
    }

    /// `RequestGroup.add_trait`.
    fn add_trait(&mut self, name: &str, kind: &str) {
        match kind {
            "required" => {
                self.required_traits.insert(name.to_string());
            }
            "forbidden" => {
                self.forbidden_traits.insert(name.to_string());
            }
            _ => tracing::warn!(
                value = kind,
                "Only (required, forbidden) traits are supported."
            ),
        }
    }

    fn is_empty(&self) -> bool {
        self.resources.is_empty()
            && self.required_traits.is_empty()
            && self.forbidden_traits.is_empty()
            && self.aggregates.is_empty()
            && self.forbidden_aggregates.is_empty()
    }

    /// `RequestGroup.to_queryparams`.
    fn push_params(&self, params: &mut Vec<(String, String)>) {
        let suffix = self.requester_id.as_deref().unwrap_or("");
        let mut resources: Vec<String> = self
            .resources
            .iter()
            .map(|(rc, n)| format!("{rc}:{n}"))
            .collect();
        resources.sort();
        params.push((format!("resources{suffix}"), resources.join(",")));
        let traits = required_value(&self.required_traits, &self.forbidden_traits);
        if !traits.is_empty() {
            params.push((format!("required{suffix}"), traits));
        }
        for ored in &self.aggregates {
            let mut uuids: Vec<&str> = ored.iter().map(String::as_str).collect();
            uuids.sort();
            params.push((
                format!("member_of{suffix}"),
                format!("in:{}", uuids.join(",")),
            ));
        }
        if let Some(in_tree) = self.in_tree.as_deref().filter(|t| !t.is_empty()) {
            params.push((format!("in_tree{suffix}"), in_tree.to_string()));
        }
        if !self.forbidden_aggregates.is_empty() {
            let uuids: Vec<&str> = self
                .forbidden_aggregates
                .iter()
                .map(String::as_str)
                .collect();
            params.push((
                format!("member_of{suffix}"),
                format!("!in:{}", uuids.join(",")),
            ));
        }
    }
}

enum Amount<'a> {
    Text(&'a str),
    Int(i64),
}

/// Sorted required names, then `!` + sorted forbidden names.
fn required_value(required: &BTreeSet<String>, forbidden: &BTreeSet<String>) -> String {
    required
        .iter()
        .cloned()
        .chain(forbidden.iter().map(|t| format!("!{t}")))
        .collect::<Vec<_>>()
        .join(",")
}

/// nova's `ResourceRequest`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceRequest {
    /// Groups in creation order (a Python dict), the unsuffixed one keyed `None`.
    groups: Vec<Group>,
    pub group_policy: Option<String>,
    /// `None` = no `limit` parameter.
    pub limit: Option<u32>,
    pub root_required: BTreeSet<String>,
    pub root_forbidden: BTreeSet<String>,
    pub same_subtree: Vec<Vec<String>>,
    /// Suffixed groups the flavor's extra specs created (empty ones included).
    pub suffixed_groups_from_flavor: usize,
    /// `hw:cpu_policy=dedicated` was translated to `PCPU`: nova asks a second,
    /// untranslated question and merges the answers.
    pub cpu_pinning_requested: bool,
}

impl ResourceRequest {
    fn empty(opts: &QueryOptions) -> Self {
        ResourceRequest {
            groups: Vec::new(),
            group_policy: None,
            limit: Some(opts.max_placement_results),
            root_required: BTreeSet::new(),
            root_forbidden: BTreeSet::new(),
            same_subtree: Vec::new(),
            suffixed_groups_from_flavor: 0,
            cpu_pinning_requested: false,
        }
    }

    /// The groups left after `strip_zeros` (plus what the destination added).
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    fn group(&mut self, ident: Option<&str>) -> &mut Group {
        let pos = match self
            .groups
            .iter()
            .position(|g| g.requester_id.as_deref() == ident)
        {
            Some(pos) => pos,
            None => {
                self.groups.push(Group::new(ident.map(str::to_string)));
                self.groups.len() - 1
            }
        };
        &mut self.groups[pos]
    }

    fn num_suffixed_groups(&self) -> usize {
        self.groups
            .iter()
            .filter(|g| g.requester_id.is_some())
            .count()
    }

    /// Resource classes asked for by any group (`merged_resources().keys()`).
    fn merged_classes(&self) -> BTreeSet<&str> {
        self.groups
            .iter()
            .flat_map(|g| g.resources.keys().map(String::as_str))
            .collect()
    }

    /// Union of every group's required traits (`all_required_traits`).
    pub fn all_required_traits(&self) -> BTreeSet<String> {
        self.groups
            .iter()
            .flat_map(|g| g.required_traits.iter().cloned())
            .collect()
    }

    /// `ResourceRequest.from_request_spec(spec, enable_pinning_translate)`.
    ///
    /// Like nova, it strips zero amounts from the spec's own `requested_resources`
    /// groups (nova adds those very objects and strips every group it holds), which
    /// a later call (the fallback query) sees.
    pub fn from_request_spec(
        spec: &mut RequestSpec,
        enable_pinning_translate: bool,
        opts: &QueryOptions,
    ) -> Result<Self, RequestError> {
        let mut rr = ResourceRequest::empty(opts);
        let rlp = &spec.request_level_params;
        rr.root_required = rlp.root_required.clone();
        rr.root_forbidden = rlp.root_forbidden.clone();
        rr.same_subtree = rlp.same_subtree.clone();
        let default_image = crate::model::ImageMeta::default();
        let image = spec.image.as_ref().unwrap_or(&default_image);
        let flavor = &spec.flavor;

        rr.process_extra_specs(&flavor.extra_specs);
        rr.suffixed_groups_from_flavor = rr.num_suffixed_groups();
        if let Some(traits) = image
            .properties
            .get("traits_required")
            .and_then(|v| v.as_array())
        {
            for t in traits.iter().filter_map(|t| t.as_str()) {
                rr.group(None).add_trait(t, "required");
            }
        }
        if enable_pinning_translate {
            rr.translate_pinning_policies(spec)?;
        }
        for g in &spec.requested_resources {
            rr.add_request_group(g)?;
        }

        let merged = rr.merged_classes();
        let need_vcpu = !merged.contains("VCPU") && !merged.contains("PCPU");
        let need_mem = !merged.contains("MEMORY_MB");
        let need_disk = !merged.contains("DISK_GB");
        if need_vcpu {
            rr.group(None)
                .add_resource("VCPU", Amount::Int(flavor.vcpus));
        }
        if need_mem {
            rr.group(None)
                .add_resource("MEMORY_MB", Amount::Int(flavor.memory_mb));
        }
        if need_disk {
            // Python's ints: the sum of the flavor's sizes may not fit an i64.
            let mut disk = i128::from(flavor.ephemeral_gb) + i128::from(ceil_gb(flavor.swap));
            if !spec.is_bfv {
                disk += i128::from(flavor.root_gb);
            }
            if disk != 0 {
                rr.group(None).add_resource_i128("DISK_GB", disk);
            }
        }

        if let Some(me) = hardware::mem_encryption(flavor, image)? {
            rr.group(None)
                .add_resource("MEM_ENCRYPTION_CONTEXT", Amount::Int(1));
            if opts.release.has(Behaviour::MemEncryptionModelTrait) {
                rr.group(None).add_trait(me.trait_name, "required");
            }
        }
        let mut pmem: BTreeMap<String, i64> = BTreeMap::new();
        for label in hardware::vpmem_labels(flavor) {
            *pmem
                .entry(hardware::normalize_rc_name(&format!(
                    "PMEM_NAMESPACE_{label}"
                )))
                .or_default() += 1;
        }
        for (rc, n) in pmem {
            rr.group(None).add_resource(&rc, Amount::Int(n));
        }
        if let Some((version, model)) = hardware::vtpm(flavor, image)? {
            let model_trait = if model == "tpm-crb" {
                "COMPUTE_SECURITY_TPM_CRB"
            } else {
                "COMPUTE_SECURITY_TPM_TIS"
            };
            let version_trait = if version == "2.0" {
                "COMPUTE_SECURITY_TPM_2_0"
            } else {
                "COMPUTE_SECURITY_TPM_1_2"
            };
            if opts
                .release
                .has(Behaviour::StatelessFirmwareAndTpmModelTraits)
            {
                rr.group(None).add_trait(model_trait, "required");
            }
            rr.group(None).add_trait(version_trait, "required");
        }
        if hardware::pci_numa_policy(flavor, image)?.as_deref() == Some("socket") {
            rr.group(None)
                .add_trait("COMPUTE_SOCKET_PCI_NUMA_AFFINITY", "required");
        }
        if hardware::secure_boot(flavor, image)?.as_deref() == Some("required") {
            rr.group(None)
                .add_trait("COMPUTE_SECURITY_UEFI_SECURE_BOOT", "required");
        }
        match hardware::maxphysaddr_mode(flavor, image)?.as_deref() {
            Some("passthrough") => rr
                .group(None)
                .add_trait("COMPUTE_ADDRESS_SPACE_PASSTHROUGH", "required"),
            Some("emulate") => rr
                .group(None)
                .add_trait("COMPUTE_ADDRESS_SPACE_EMULATED", "required"),
            _ => {}
        }
        if opts
            .release
            .has(Behaviour::StatelessFirmwareAndTpmModelTraits)
            && hardware::stateless_firmware(image)
        {
            rr.group(None)
                .add_trait("COMPUTE_SECURITY_STATELESS_FIRMWARE", "required");
        }
        rr.strip_zeros();
        for g in &mut spec.requested_resources {
            g.resources.retain(|_, n| *n != 0);
        }
        Ok(rr)
    }

    /// `_process_extra_specs`.
    fn process_extra_specs(&mut self, extra_specs: &BTreeMap<String, String>) {
        for (key, val) in extra_specs {
            if key == "group_policy" {
                if val == "none" || val == "isolate" {
                    self.group_policy = Some(val.clone());
                } else {
                    tracing::warn!(group_policy = %val, "Invalid group_policy. Valid values are 'none' and 'isolate'.");
                }
                continue;
            }
            let Some((is_resource, suffix, name)) = parse_extra_spec_key(key) else {
                continue;
            };
            let group = self.group(suffix);
            if is_resource {
                group.add_resource(name, Amount::Text(val));
            } else {
                group.add_trait(name, val);
            }
        }
    }

    /// `_translate_pinning_policies`.
    fn translate_pinning_policies(&mut self, spec: &RequestSpec) -> Result<(), RequestError> {
        let flavor = &spec.flavor;
        let default_image = crate::model::ImageMeta::default();
        let image = spec.image.as_ref().unwrap_or(&default_image);
        let cpu_policy = hardware::cpu_policy(flavor, image)?;
        let thread_policy = hardware::cpu_thread_policy(flavor, image)?;
        let emulator_policy = hardware::emulator_threads_policy(flavor)?;
        let mut pcpus: i128 = 0;
        match cpu_policy.as_deref() {
            Some("dedicated") => {
                self.cpu_pinning_requested = true;
                pcpus = i128::from(flavor.vcpus);
            }
            Some("mixed") => {
                let dedicated = hardware::dedicated_cpus(flavor)?;
                let realtime = hardware::realtime_cpus(flavor, image)?;
                pcpus = dedicated
                    .filter(|s| !s.is_empty())
                    .or(realtime)
                    .map_or(0, |s| s.len());
                let vcpus = i128::from(flavor.vcpus) - pcpus;
                self.group(None).add_resource_i128("VCPU", vcpus);
            }
            _ => {}
        }
        if matches!(cpu_policy.as_deref(), Some("dedicated") | Some("mixed")) {
            if emulator_policy.as_deref() == Some("isolate") {
                pcpus += 1;
            }
            self.group(None).add_resource_i128("PCPU", pcpus);
        }
        match thread_policy.as_deref() {
            Some("isolate") => self
                .group(None)
                .add_trait("HW_CPU_HYPERTHREADING", "forbidden"),
            Some("require") => self
                .group(None)
                .add_trait("HW_CPU_HYPERTHREADING", "required"),
            _ => {}
        }
        Ok(())
    }

    /// `_add_request_group` for a group from outside the flavor.
    fn add_request_group(&mut self, g: &RequestGroup) -> Result<(), RequestError> {
        let Some(id) = g.requester_id.as_deref().filter(|id| !id.is_empty()) else {
            return Err(RequestError::new(
                "ValueError",
                "Missing requester_id in RequestGroup! This is probably a programmer error.",
            ));
        };
        let group = Group::from_requested(g);
        if group.is_empty() {
            return Err(RequestError::new(
                "ValueError",
                format!(
                    "Refusing to add no-op RequestGroup with requester_id={id}. This is a \
                     probably a programmer error."
                ),
            ));
        }
        if self
            .groups
            .iter()
            .any(|x| x.requester_id.as_deref() == Some(id))
        {
            return Err(RequestError::new(
                "RequestGroupSuffixConflict",
                format!("Duplicate request group suffix {id}."),
            ));
        }
        self.groups.push(group);
        Ok(())
    }

    /// `strip_zeros`: zero amounts go, then groups left empty.
    fn strip_zeros(&mut self) {
        for g in &mut self.groups {
            g.resources.retain(|_, n| !n.is_zero());
        }
        self.groups.retain(|g| !g.is_empty());
    }

    /// The query parameters of `to_querystring`, sorted as nova sorts them.
    pub fn query_params(&self) -> Vec<(String, String)> {
        let mut params = Vec::new();
        if let Some(limit) = self.limit {
            params.push(("limit".to_string(), limit.to_string()));
        }
        if let Some(policy) = &self.group_policy {
            params.push(("group_policy".to_string(), policy.clone()));
        }
        if !self.root_required.is_empty() || !self.root_forbidden.is_empty() {
            params.push((
                "root_required".to_string(),
                required_value(&self.root_required, &self.root_forbidden),
            ));
        }
        for suffixes in &self.same_subtree {
            let mut sorted: Vec<&str> = suffixes.iter().map(String::as_str).collect();
            sorted.sort();
            params.push(("same_subtree".to_string(), sorted.join(",")));
        }
        for g in &self.groups {
            g.push_params(&mut params);
        }
        params.sort();
        params
    }

    /// `to_querystring()`.
    pub fn to_querystring(&self) -> String {
        crate::placement::query::encode_query(&self.query_params())
    }
}

impl Group {
    fn add_resource_i128(&mut self, rc: &str, amount: i128) {
        match i64::try_from(amount) {
            Ok(n) => self.add_resource(rc, Amount::Int(n)),
            Err(_) => {
                let digits = amount.unsigned_abs().to_string();
                self.add_resource(
                    rc,
                    Amount::Text(&if amount < 0 {
                        format!("-{digits}")
                    } else {
                        digits
                    }),
                )
            }
        }
    }
}

/// The key pattern `^(resources|trait)([a-zA-Z0-9_-]{1,64})?:(.*)$` of nova's
/// `XS_KEYPAT` (Python `re.match`: `$` also matches before one final newline).
/// Returns (is a resource key, suffix, name).
fn parse_extra_spec_key(key: &str) -> Option<(bool, Option<&str>, &str)> {
    let (is_resource, rest) = if let Some(rest) = key.strip_prefix("resources") {
        (true, rest)
    } else if let Some(rest) = key.strip_prefix("trait") {
        (false, rest)
    } else {
        return None;
    };
    let suffix_len = rest
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
        .count();
    if suffix_len > 64 {
        return None;
    }
    let (suffix, after) = rest.split_at(suffix_len);
    let name = after.strip_prefix(':')?;
    let name = name.strip_suffix('\n').unwrap_or(name);
    if name.contains('\n') {
        return None;
    }
    Some((is_resource, (!suffix.is_empty()).then_some(suffix), name))
}

/// nova's `convert_mb_to_ceil_gb`.
fn ceil_gb(mb: i64) -> i64 {
    if mb == 0 {
        0
    } else {
        mb.div_euclid(1024) + i64::from(mb.rem_euclid(1024) != 0)
    }
}

/// The target host/node nova looks up for `in_tree` (`resources_from_request_spec`):
/// `requested_destination.host/node` first, else `force_hosts[0]` / `force_nodes[0]`.
/// `None` when there is nothing to look up.
pub fn destination_target(spec: &RequestSpec) -> Option<Target> {
    let dest = spec.requested_destination.as_ref();
    let truthy = |s: &Option<String>| s.as_deref().is_some_and(|s| !s.is_empty());
    // Python's `target_host or force_hosts[0]`.
    let mut host = dest.and_then(|d| d.host.clone());
    if !truthy(&host) {
        if let Some(forced) = spec.force_hosts.first() {
            host = Some(forced.clone());
        }
    }
    let mut node = dest.and_then(|d| d.node.clone());
    if !truthy(&node) {
        if let Some(forced) = spec.force_nodes.first() {
            node = Some(forced.clone());
        }
    }
    if !truthy(&host) && !truthy(&node) {
        return None;
    }
    Some(Target {
        host,
        node,
        cell_uuid: dest.and_then(|d| d.cell_uuid.clone()),
    })
}

/// The first (pinning-translated) query nova sends for `spec`, sorted by key then
/// value, without a target-node lookup (a target host/node is not turned into
/// `in_tree`; the manager does that lookup and calls
/// [`resources_from_request_spec`] itself).
pub fn allocation_candidates_query(
    spec: &RequestSpec,
    opts: &QueryOptions,
) -> Result<Vec<(String, String)>, RequestError> {
    let mut spec = spec.clone();
    Ok(resources_from_request_spec(&mut spec, opts, true, None)?.query_params())
}

/// `resources_from_request_spec`: the ResourceRequest plus the destination's
/// aggregates, target node and the `limit` / `group_policy` adjustments.
///
/// `target_nodes` is what the caller found for [`destination_target`] (`None`:
/// not looked up, the target is ignored). With a target, no node is
/// `NoValidHost`, one node sets `in_tree` (and rewrites the destination's
/// host/node, as nova does), several nodes drop `limit`.
pub fn resources_from_request_spec(
    spec: &mut RequestSpec,
    opts: &QueryOptions,
    enable_pinning_translate: bool,
    target_nodes: Option<&[TargetNode]>,
) -> Result<ResourceRequest, RequestError> {
    let mut rr = ResourceRequest::from_request_spec(spec, enable_pinning_translate, opts)?;
    if let Some(dest) = &spec.requested_destination {
        if !dest.aggregates.is_empty() {
            rr.group(None).aggregates = dest
                .aggregates
                .iter()
                .map(|ored| ored.split(',').map(str::to_string).collect())
                .collect();
        }
        if !dest.forbidden_aggregates.is_empty() {
            let forbidden = dest.forbidden_aggregates.clone();
            rr.group(None).forbidden_aggregates.extend(forbidden);
        }
    }
    if let (Some(target), Some(nodes)) = (destination_target(spec), target_nodes) {
        match nodes {
            [] => {
                let show = |s: &Option<String>| s.clone().unwrap_or_else(|| "None".into());
                return Err(RequestError::new(
                    "NoValidHost",
                    format!(
                        "No valid host was found. No such host - host: {} node: {} ",
                        show(&target.host),
                        show(&target.node)
                    ),
                ));
            }
            [node] => {
                if let Some(dest) = spec.requested_destination.as_mut() {
                    dest.host = Some(node.host.clone());
                    dest.node = Some(node.hypervisor_hostname.clone());
                }
                rr.group(None).in_tree = Some(node.uuid.clone());
            }
            _ => rr.limit = None,
        }
    }
    if spec
        .scheduler_hints
        .as_ref()
        .is_some_and(|hints| hints.keys().any(|k| UNLIMITED_HINTS.contains(&k.as_str())))
    {
        rr.limit = None;
    }
    if rr.num_suffixed_groups() >= 2 && rr.group_policy.is_none() {
        tracing::warn!("There is more than one numbered request group in the allocation candidate query but the flavor did not specify any group policy.");
        if rr.suffixed_groups_from_flavor <= 1 {
            rr.group_policy = Some("none".to_string());
        }
    }
    Ok(rr)
}

#[cfg(test)]
mod tests;
