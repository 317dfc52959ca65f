// SPDX-License-Identifier: Apache-2.0
//! The nova releases this daemon schedules as, and what each one's scheduler does
//! differently: a cloud is scheduled as the release its control plane runs.
//!
//! [`Behaviour`] names each difference and the release that brought it; consumers ask
//! [`NovaSeries::has`]. The facts are read from each release's own source by
//! `scripts/release_facts.sh` into `data/nova-releases/<series>.json`, and a test holds
//! this table to them (`tests/core/release_profiles.rs`).

use std::fmt;

/// A nova stable series, oldest first (the order is the release order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NovaSeries {
    /// nova 29, a SLURP release.
    V2024_1,
    /// nova 30.
    V2024_2,
    /// nova 31, a SLURP release.
    V2025_1,
    /// nova 32.
    V2025_2,
    /// nova 33, a SLURP release.
    V2026_1,
    /// nova 34.
    V2026_2,
}

/// A series with its nova major version and the newest `SERVICE_VERSION` of its
/// stable branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NovaRelease {
    pub series: NovaSeries,
    pub major: u32,
    pub name: &'static str,
    /// The nova release the facts were read from (the series' newest).
    pub read_from: &'static str,
    pub service_version: i64,
    /// `ImageMetaPropsPayload.VERSION`: the one object version of what the scheduler
    /// sends or answers that differs between these releases (it follows
    /// `ImageMetaProps`, whose fields it copies).
    pub image_meta_props_payload: &'static str,
}

const fn release(
    series: NovaSeries,
    major: u32,
    name: &'static str,
    read_from: &'static str,
    service_version: i64,
    image_meta_props_payload: &'static str,
) -> NovaRelease {
    NovaRelease {
        series,
        major,
        name,
        read_from,
        service_version,
        image_meta_props_payload,
    }
}

/// Every series this daemon has a profile for, oldest first. Service versions:
/// `SERVICE_VERSION` in nova/objects/service.py of each release; payload versions in
/// nova/notifications/objects/image.py.
pub const NOVA_RELEASES: &[NovaRelease] = &[
    release(NovaSeries::V2024_1, 29, "2024.1", "29.4.0", 67, "1.13"),
    release(NovaSeries::V2024_2, 30, "2024.2", "30.3.0", 67, "1.14"),
    release(NovaSeries::V2025_1, 31, "2025.1", "31.3.1", 68, "1.15"),
    release(NovaSeries::V2025_2, 32, "2025.2", "32.2.1", 70, "1.18"),
    release(NovaSeries::V2026_1, 33, "2026.1", "33.0.2", 72, "1.18"),
    release(NovaSeries::V2026_2, 34, "2026.2", "34.0.0", 74, "1.20"),
];

/// The newest series: what a test or tool without a cloud decides as.
impl Default for NovaSeries {
    fn default() -> Self {
        NovaSeries::NEWEST
    }
}

impl NovaSeries {
    /// The newest series: what the daemon schedules as with nothing to go by.
    pub const NEWEST: NovaSeries = NovaSeries::V2026_2;

    pub fn release(self) -> &'static NovaRelease {
        NOVA_RELEASES
            .iter()
            .find(|r| r.series == self)
            .expect("every series is in NOVA_RELEASES")
    }

    /// `2024.1`.
    pub fn name(self) -> &'static str {
        self.release().name
    }

    pub fn major(self) -> u32 {
        self.release().major
    }

    pub fn service_version(self) -> i64 {
        self.release().service_version
    }

    /// A series by its name (`2025.1`), or by its nova major version (`31`).
    pub fn parse(text: &str) -> Option<NovaSeries> {
        let text = text.trim();
        NOVA_RELEASES
            .iter()
            .find(|r| r.name == text || r.major.to_string() == text)
            .map(|r| r.series)
    }

    /// Whether this series' scheduler does `behaviour`.
    pub fn has(self, behaviour: Behaviour) -> bool {
        self >= behaviour.since()
    }
}

impl fmt::Display for NovaSeries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "nova {} ({})", self.major(), self.name())
    }
}

/// What the scheduler of one release does and an older one does not. Each is read
/// from the releases' own code (`data/nova-releases/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// `AggregateMultiTenancyIsolation` takes every metadata key prefixed with
    /// `filter_tenant_id` (before: the key `filter_tenant_id` only).
    TenantKeyPrefix,
    /// `ResourceRequest` requires `COMPUTE_SECURITY_STATELESS_FIRMWARE` for
    /// `hw_firmware_stateless` images and the vTPM model's trait (`TPM_TIS`/`TPM_CRB`)
    /// beside its version's.
    StatelessFirmwareAndTpmModelTraits,
    /// `ImagePropertiesFilter` reads `img_hv_requested_version` with oslo.utils'
    /// `versionutils.VersionPredicate` (before: distutils' `VersionPredicate`).
    VersionutilsPredicate,
    /// `ImagePropertiesWeigher` and its `[filter_scheduler] image_props_weight_*`
    /// options exist.
    ImagePropertiesWeigher,
    /// The release's upper-constraints install netaddr 1.x (before: 0.10.1), whose
    /// parsing `SimpleCIDRAffinityFilter` meets. Read from openstack/requirements'
    /// `upper-constraints.txt` of each release, not from nova's code.
    Netaddr1,
    /// Memory encryption requires the model's CPU trait (`HW_CPU_X86_AMD_SEV` or
    /// `_SEV_ES`) beside `MEM_ENCRYPTION_CONTEXT`.
    MemEncryptionModelTrait,
    /// The `virtio_sound_filter` request filter.
    VirtioSoundFilter,
    /// The `tpm_secret_security_filter` request filter.
    TpmSecretSecurityFilter,
    /// The `owner_nova_filter` request filter (itself gated on every nova-compute
    /// being at service version 73).
    OwnerNovaFilter,
    /// `HostState._lock_name` is the string `'host-node'` (before: the tuple
    /// `(host, node)`), as `ComputeCapabilitiesFilter` and `JsonFilter` can read it.
    LockNameJoined,
    /// The periodic host discovery runs on the leader only, the first by host name of
    /// the nova-scheduler services that are up (before: on every scheduler).
    DiscoverHostsLeaderOnly,
    /// `[filter_scheduler] aggregate_image_properties_isolation_namespace` and
    /// `_separator` are deprecated for removal.
    IsolationOptionsDeprecated,
}

/// An option a release deprecates for removal: oslo.config warns when it is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeprecatedOption {
    pub group: &'static str,
    pub name: &'static str,
    /// `deprecated_reason`, as nova's code writes it (newlines included).
    pub reason: &'static str,
    pub since: Behaviour,
}

const ISOLATION_REASON: &str = "
It no longer possible to filter on arbitrary image metadata properties. Support
for this was removed in 12.0.0 (Liberty). As a result, this option is no longer
useful.
";

/// The scheduler options deprecated for removal, with the release that did it.
pub const DEPRECATED_FOR_REMOVAL: &[DeprecatedOption] = &[
    DeprecatedOption {
        group: "filter_scheduler",
        name: "aggregate_image_properties_isolation_namespace",
        reason: ISOLATION_REASON,
        since: Behaviour::IsolationOptionsDeprecated,
    },
    DeprecatedOption {
        group: "filter_scheduler",
        name: "aggregate_image_properties_isolation_separator",
        reason: ISOLATION_REASON,
        since: Behaviour::IsolationOptionsDeprecated,
    },
];

impl DeprecatedOption {
    /// oslo.config's warning when the option is set (`_get_from_namespace`).
    pub fn warning(&self) -> String {
        format!(
            "Option \"{}\" from group \"{}\" is deprecated for removal ({}).  Its value may \
             be silently ignored in the future.",
            self.name, self.group, self.reason
        )
    }
}

impl Behaviour {
    pub const ALL: &'static [Behaviour] = &[
        Behaviour::TenantKeyPrefix,
        Behaviour::StatelessFirmwareAndTpmModelTraits,
        Behaviour::VersionutilsPredicate,
        Behaviour::ImagePropertiesWeigher,
        Behaviour::Netaddr1,
        Behaviour::MemEncryptionModelTrait,
        Behaviour::VirtioSoundFilter,
        Behaviour::TpmSecretSecurityFilter,
        Behaviour::OwnerNovaFilter,
        Behaviour::LockNameJoined,
        Behaviour::DiscoverHostsLeaderOnly,
        Behaviour::IsolationOptionsDeprecated,
    ];

    /// The first series that does it.
    pub const fn since(self) -> NovaSeries {
        match self {
            Behaviour::TenantKeyPrefix | Behaviour::StatelessFirmwareAndTpmModelTraits => {
                NovaSeries::V2024_2
            }
            Behaviour::VersionutilsPredicate
            | Behaviour::ImagePropertiesWeigher
            | Behaviour::Netaddr1
            | Behaviour::DiscoverHostsLeaderOnly => NovaSeries::V2025_1,
            Behaviour::MemEncryptionModelTrait | Behaviour::VirtioSoundFilter => {
                NovaSeries::V2025_2
            }
            Behaviour::TpmSecretSecurityFilter | Behaviour::IsolationOptionsDeprecated => {
                NovaSeries::V2026_1
            }
            Behaviour::OwnerNovaFilter | Behaviour::LockNameJoined => NovaSeries::V2026_2,
        }
    }
}

/// `[nova_scheduler_rs] nova_release`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReleaseChoice {
    /// The control plane's release, read from its service rows at startup.
    #[default]
    Auto,
    Series(NovaSeries),
}

impl ReleaseChoice {
    /// `auto`, a series name or a nova major version; `None` for anything else.
    pub fn parse(text: &str) -> Option<ReleaseChoice> {
        if text.trim().eq_ignore_ascii_case("auto") {
            return Some(ReleaseChoice::Auto);
        }
        NovaSeries::parse(text).map(ReleaseChoice::Series)
    }

    /// The option's accepted values, for the sample and errors.
    pub fn choices() -> Vec<&'static str> {
        std::iter::once("auto")
            .chain(NOVA_RELEASES.iter().map(|r| r.name))
            .collect()
    }
}

/// Why a series was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeriesSource {
    /// `nova_release` names it.
    Configured,
    /// The control plane's service version `version` is this series' (or, shared by
    /// several, the oldest of them: `also` names the others).
    ServiceVersion { version: i64, also: Vec<NovaSeries> },
    /// The control plane is newer than every series known here.
    NewerThanKnown { version: i64 },
    /// Between two known series' versions (a development build): the older one.
    Between { version: i64 },
    /// No nova service row to go by.
    NoServiceRow,
}

/// The series a cloud is scheduled as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedSeries {
    pub series: NovaSeries,
    pub source: SeriesSource,
}

/// A control plane older than every profile: scheduling it as nova 29 would decide
/// differently from its own scheduler in ways nobody has checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the control plane runs service version {version}, older than nova {oldest_major} \
     ({oldest_name}, version {oldest_version}), the oldest release nova-scheduler-rs \
     schedules as; keep nova's own nova-scheduler on this cloud"
)]
pub struct TooOld {
    pub version: i64,
    pub oldest_major: u32,
    pub oldest_name: &'static str,
    pub oldest_version: i64,
}

/// The series to schedule as: the configured one, else the one whose service version
/// the control plane's newest service row (`control_plane`, as chosen for our own
/// `services` row) carries.
pub fn resolve(
    choice: ReleaseChoice,
    control_plane: Option<i64>,
) -> Result<ResolvedSeries, TooOld> {
    if let ReleaseChoice::Series(series) = choice {
        return Ok(ResolvedSeries {
            series,
            source: SeriesSource::Configured,
        });
    }
    let Some(version) = control_plane else {
        return Ok(ResolvedSeries {
            series: NovaSeries::NEWEST,
            source: SeriesSource::NoServiceRow,
        });
    };
    let oldest = &NOVA_RELEASES[0];
    if version < oldest.service_version {
        return Err(TooOld {
            version,
            oldest_major: oldest.major,
            oldest_name: oldest.name,
            oldest_version: oldest.service_version,
        });
    }
    let same: Vec<NovaSeries> = NOVA_RELEASES
        .iter()
        .filter(|r| r.service_version == version)
        .map(|r| r.series)
        .collect();
    if let Some((&first, rest)) = same.split_first() {
        return Ok(ResolvedSeries {
            series: first,
            source: SeriesSource::ServiceVersion {
                version,
                also: rest.to_vec(),
            },
        });
    }
    let below = NOVA_RELEASES
        .iter()
        .rev()
        .find(|r| r.service_version < version)
        .expect("not older than the oldest");
    let source = if below.series == NovaSeries::NEWEST {
        SeriesSource::NewerThanKnown { version }
    } else {
        SeriesSource::Between { version }
    };
    Ok(ResolvedSeries {
        series: below.series,
        source,
    })
}

impl fmt::Display for ResolvedSeries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "scheduling as {}", self.series)?;
        match &self.source {
            SeriesSource::Configured => write!(f, ": [nova_scheduler_rs] nova_release"),
            SeriesSource::ServiceVersion { version, also } if also.is_empty() => write!(
                f,
                ": the control plane's service version {version} (nova_release = auto)"
            ),
            SeriesSource::ServiceVersion { version, also } => {
                let others: Vec<String> = also.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    ": the control plane's service version {version}, which {} shares; \
                     set [nova_scheduler_rs] nova_release on such a cloud",
                    others.join(" and ")
                )
            }
            SeriesSource::NewerThanKnown { version } => write!(
                f,
                ": the control plane's service version {version} is newer than any release \
                 known here"
            ),
            SeriesSource::Between { version } => write!(
                f,
                ": the control plane's service version {version} is between releases \
                 (a development build); the older one"
            ),
            SeriesSource::NoServiceRow => {
                write!(
                    f,
                    ": no nova service row to read the control plane's release from"
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_are_in_release_order_with_rising_versions() {
        for pair in NOVA_RELEASES.windows(2) {
            assert!(pair[0].series < pair[1].series);
            assert_eq!(pair[0].major + 1, pair[1].major);
            assert!(pair[0].service_version <= pair[1].service_version);
        }
        assert_eq!(NOVA_RELEASES.last().unwrap().series, NovaSeries::NEWEST);
    }

    #[test]
    fn parse_takes_names_majors_and_auto() {
        assert_eq!(NovaSeries::parse("2025.1"), Some(NovaSeries::V2025_1));
        assert_eq!(NovaSeries::parse("29"), Some(NovaSeries::V2024_1));
        assert_eq!(NovaSeries::parse("2023.2"), None);
        assert_eq!(ReleaseChoice::parse(" AUTO "), Some(ReleaseChoice::Auto));
        assert_eq!(ReleaseChoice::parse("dalmatian"), None);
        assert_eq!(ReleaseChoice::choices()[0], "auto");
        assert_eq!(ReleaseChoice::choices().len(), NOVA_RELEASES.len() + 1);
    }

    #[test]
    fn auto_maps_a_service_version_to_the_release_that_introduced_it() {
        let auto = |v| resolve(ReleaseChoice::Auto, v).map(|r| r.series);
        assert_eq!(auto(Some(68)), Ok(NovaSeries::V2025_1));
        assert_eq!(auto(Some(74)), Ok(NovaSeries::V2026_2));
        // 67 is nova 29's and nova 30's: the older, and the log says which shares it.
        let shared = resolve(ReleaseChoice::Auto, Some(67)).unwrap();
        assert_eq!(shared.series, NovaSeries::V2024_1);
        assert!(
            shared.to_string().contains("nova 30 (2024.2) shares"),
            "{shared}"
        );
        // A development version between 70 and 72 is scheduled as the older release.
        assert_eq!(auto(Some(71)), Ok(NovaSeries::V2025_2));
        assert_eq!(auto(Some(80)), Ok(NovaSeries::V2026_2));
        assert_eq!(auto(None), Ok(NovaSeries::NEWEST));
        let too_old = resolve(ReleaseChoice::Auto, Some(66)).unwrap_err();
        assert!(
            too_old.to_string().contains("older than nova 29"),
            "{too_old}"
        );
    }

    #[test]
    fn a_configured_series_wins_over_the_control_plane() {
        let r = resolve(ReleaseChoice::Series(NovaSeries::V2024_2), Some(74)).unwrap();
        assert_eq!(r.series, NovaSeries::V2024_2);
        assert_eq!(r.source, SeriesSource::Configured);
    }

    #[test]
    fn behaviours_start_where_nova_changed() {
        assert!(!NovaSeries::V2024_1.has(Behaviour::TenantKeyPrefix));
        assert!(NovaSeries::V2024_2.has(Behaviour::TenantKeyPrefix));
        assert!(!NovaSeries::V2024_2.has(Behaviour::ImagePropertiesWeigher));
        assert!(NovaSeries::V2025_1.has(Behaviour::ImagePropertiesWeigher));
        assert!(!NovaSeries::V2026_1.has(Behaviour::OwnerNovaFilter));
        assert!(Behaviour::ALL.iter().all(|b| NovaSeries::NEWEST.has(*b)));
    }
}
