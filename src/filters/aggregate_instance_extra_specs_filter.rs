// SPDX-License-Identifier: Apache-2.0
//! `AggregateInstanceExtraSpecsFilter`: the flavor's extra specs in the
//! `aggregate_instance_extra_specs:` scope, **and every unscoped one**, must be matched
//! by the metadata of the host's aggregates.
//!
//! nova's rules, reproduced:
//! * No extra specs → pass (aggregates are not read).
//! * Metadata: [`aggregate_metadata_get_by_host`] over all the host's aggregates
//!   (values split on `,` and stripped, pooled per key).
//! * The key is split on the **first** `:` only. Two parts with a scope other than
//!   `aggregate_instance_extra_specs` → ignored; with it, the rest (colons included) is
//!   the metadata key. No colon: the key itself, which therefore must exist in the
//!   metadata (`hw_rng`-style unscoped specs fail every host without that metadata).
//! * Missing or empty value set → fail. Otherwise the key passes when any value
//!   matches with [`extra_specs_ops`](super::extra_specs_ops).
//!
//! nova walks the flavor's dict and each value set in Python order (a set: hash order,
//! randomized per process). We walk both sorted. It only matters when `match` raises
//! (a numeric operator against text): nova then fails the request with `ValueError`,
//! unless an earlier value in its order matched. [`AggregateInstanceExtraSpecsFilter::check`]
//! reports that exception; `host_passes` fails the host.

use super::extra_specs_ops::matches;
use super::utils::aggregate_metadata_get_by_host;
use super::{FilterRequest, HostFilter};
use crate::model::{Flavor, HostState};
use crate::py::PyError;
use tracing::{debug, warn};

const SCOPE: &str = "aggregate_instance_extra_specs";

pub struct AggregateInstanceExtraSpecsFilter;

impl AggregateInstanceExtraSpecsFilter {
    pub const NAME: &'static str = "AggregateInstanceExtraSpecsFilter";

    /// nova's `host_passes`, raising where nova raises.
    pub fn check(host: &HostState, flavor: &Flavor) -> Result<bool, PyError> {
        if flavor.extra_specs.is_empty() {
            return Ok(true);
        }
        let metadata = aggregate_metadata_get_by_host(host, None);
        for (key, req) in &flavor.extra_specs {
            let key = match key.split_once(':') {
                Some((scope, rest)) if scope == SCOPE => rest,
                Some(_) => continue,
                None => key.as_str(),
            };
            let Some(vals) = metadata.get(key).filter(|v| !v.is_empty()) else {
                debug!(host = %host.host, node = %host.nodename, key,
                       "AggregateInstanceExtraSpecsFilter: extra_spec is not in aggregate");
                return Ok(false);
            };
            let mut matched = false;
            for val in vals {
                if matches(Some(val), req)? {
                    matched = true;
                    break;
                }
            }
            if !matched {
                debug!(host = %host.host, node = %host.nodename, key, req, ?vals,
                       "AggregateInstanceExtraSpecsFilter: aggregate values do not match");
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl HostFilter for AggregateInstanceExtraSpecsFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        Self::check(host, &req.spec.flavor).unwrap_or_else(|e| {
            // nova lets this exception end the whole request; we fail the host.
            warn!(host = %host.host, node = %host.nodename, error = %e,
                  "AggregateInstanceExtraSpecsFilter: nova would raise here; failing the host");
            false
        })
    }

    fn once_per_request(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Aggregate;
    use crate::py::PyExc;
    use std::sync::Arc;

    fn host(aggs: &[&[(&str, &str)]]) -> HostState {
        HostState {
            host: "host1".into(),
            nodename: "node1".into(),
            aggregates: aggs
                .iter()
                .enumerate()
                .map(|(i, md)| {
                    Arc::new(Aggregate {
                        id: i as i64 + 1,
                        hosts: ["host1".to_string()].into(),
                        metadata: md
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect(),
                        ..Default::default()
                    })
                })
                .collect(),
            ..Default::default()
        }
    }

    fn check(h: &HostState, specs: &[(&str, &str)]) -> Result<bool, PyError> {
        let flavor = Flavor {
            extra_specs: specs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        };
        AggregateInstanceExtraSpecsFilter::check(h, &flavor)
    }

    /// nova's test_aggregate_instance_extra_specs_filters.py.
    #[test]
    fn nova_vectors() {
        let none = HostState::default();
        assert_eq!(check(&none, &[]), Ok(true));
        let h = host(&[&[("opt1", "1"), ("opt2", "2")]]);
        assert_eq!(
            check(
                &h,
                &[("opt1", "1"), ("aggregate_instance_extra_specs:opt2", "2")]
            ),
            Ok(true)
        );
        let h = host(&[&[("opt1", "1")], &[("opt1", "3")]]);
        assert_eq!(
            check(
                &h,
                &[("opt1", "1"), ("aggregate_instance_extra_specs:opt1", "3")]
            ),
            Ok(true)
        );
        let h = host(&[&[("opt1", "1"), ("opt2", "2")]]);
        assert_eq!(check(&h, &[("opt1", "1"), ("opt2", "222")]), Ok(false));
        let h = host(&[&[("aggregate_instance_extra_specs", "1")]]);
        assert_eq!(
            check(&h, &[("aggregate_instance_extra_specs", "1")]),
            Ok(true)
        );
    }

    #[test]
    fn scope_split_on_first_colon_and_missing_keys() {
        let h = host(&[&[("a:b", "x, y"), ("n", "5")]]);
        assert_eq!(
            check(&h, &[("aggregate_instance_extra_specs:a:b", "y")]),
            Ok(true)
        );
        assert_eq!(
            check(&h, &[("other:a", "whatever")]),
            Ok(true),
            "other scopes ignored"
        );
        assert_eq!(
            check(&h, &[("missing", "1")]),
            Ok(false),
            "unscoped keys must exist"
        );
        assert_eq!(check(&h, &[("n", ">= 4")]), Ok(true));
        assert_eq!(check(&h, &[("n", "<or> 1 <or> 5")]), Ok(true));
        assert_eq!(check(&host(&[]), &[("n", "5")]), Ok(false));
        // A numeric operator against text raises, as in nova (value set sorted: 'x' < 'y').
        assert_eq!(
            check(&h, &[("aggregate_instance_extra_specs:a:b", "= 1")])
                .unwrap_err()
                .kind,
            PyExc::ValueError
        );
        // The first matching value stops the walk before a raising one.
        let h = host(&[&[("k", "1, z")]]);
        assert_eq!(check(&h, &[("k", ">= 0")]), Ok(true));
    }
}
