// SPDX-License-Identifier: Apache-2.0
//! Plain data shared by the decision core and the edges. No I/O here.
//!
//! nova's objects arrive as versioned-object primitives (JSON envelopes); they are
//! decoded tolerantly (any minor version, unknown fields ignored) into the structs
//! below, which hold only what the scheduler reads.

pub mod aggregate;
pub mod allocation_candidate;
pub mod fields;
pub mod host_state;
pub mod request_spec;
pub mod request_spec_legacy;
pub mod selection;

pub use crate::py::object::DecodeError;
pub use aggregate::Aggregate;
pub use allocation_candidate::AllocationCandidate;
pub use host_state::{
    HostState, HostStats, InstanceFlavorIds, InstanceSystemMetadata, ServiceInfo,
};
pub use request_spec::{
    Destination, Flavor, ImageMeta, InstanceGroup, NetworkRequest, RequestGroup,
    RequestLevelParams, RequestSpec,
};
pub use selection::{SchedulerLimits, Selection};
