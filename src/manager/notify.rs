// SPDX-License-Identifier: Apache-2.0
//! nova's `scheduler.select_destinations.start` / `.end` of one call, built from the
//! call's spec primitive as nova builds them from its RequestSpec object (4.0–4.2
//! requests carry no primitive: none is sent).

use crate::model::RequestSpec;
use crate::notifications::{NotifiedSpec, Notifier, Phase};
use crate::release::NovaSeries;
use crate::rpc::RequestContext;
use serde_json::{Map, Value};
use tracing::debug;

/// The notifications of one call; inert when no notifier is active.
pub(super) struct Notice<'a> {
    sending: Option<(&'a Notifier, NotifiedSpec)>,
    /// The destination's aggregates before the request filters.
    aggregates: Option<Vec<String>>,
}

impl<'a> Notice<'a> {
    /// From the call's arguments and its spec as decoded, before the request filters.
    pub(super) fn new(
        notifier: Option<&'a Notifier>,
        args: &Map<String, Value>,
        spec: &RequestSpec,
        release: NovaSeries,
    ) -> Self {
        let notifier = notifier.filter(|n| n.is_active());
        let raw_spec = notifier.and_then(|_| args.get("spec_obj").cloned());
        if notifier.is_some() && raw_spec.is_none() {
            debug!("select_destinations without spec_obj (RPC < 4.3): no notifications");
        }
        let sending = notifier.zip(raw_spec.map(|raw| NotifiedSpec::new(raw, release)));
        let aggregates = sending.as_ref().and_then(|_| destination_aggregates(spec));
        Notice {
            sending,
            aggregates,
        }
    }

    /// `.start`, with the spec as the request filters left it.
    pub(super) fn start(&mut self, ctx: &RequestContext, spec: &RequestSpec) {
        let Some((notifier, notified)) = self.sending.as_mut() else {
            return;
        };
        let after = destination_aggregates(spec);
        if after != self.aggregates {
            notified.set_destination_aggregates(&after.unwrap_or_default());
        }
        notifier.select_destinations(ctx, notified, Phase::Start);
    }

    /// `.end`; nova's `_schedule` set `spec_obj.instance_uuid` to each instance in
    /// turn, so it names the last one.
    pub(super) fn end(&mut self, ctx: &RequestContext, last_instance: Option<&str>) {
        let Some((notifier, notified)) = self.sending.as_mut() else {
            return;
        };
        if let Some(uuid) = last_instance {
            notified.set_instance_uuid(uuid);
        }
        notifier.select_destinations(ctx, notified, Phase::End);
    }
}

fn destination_aggregates(spec: &RequestSpec) -> Option<Vec<String>> {
    spec.requested_destination
        .as_ref()
        .map(|d| d.aggregates.clone())
}
