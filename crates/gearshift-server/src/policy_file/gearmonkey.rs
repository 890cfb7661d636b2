//! `[[gearmonkey]]` sections: which functions the GearMonkey bridge serves
//! (`match`, a glob, one per section), and optionally the Redis `url` and
//! `ca` file when `--gearmonkey` / `--gearmonkey-ca` do not give them.
//! `route = "gearmonkey"` sends the section's functions' Gearman jobs to
//! GearMonkey workers even while Gearman workers are connected.

use serde::Deserialize;
use toml::Spanned;

use super::raw::{bad, Bad};

/// One `[[gearmonkey]]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGearmonkey {
    #[serde(rename = "match")]
    pattern: Option<Spanned<String>>,
    url: Option<Spanned<String>>,
    ca: Option<String>,
    route: Option<Spanned<String>>,
}

/// What the `[[gearmonkey]]` sections say together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GearmonkeyDecl {
    /// The Redis URL, if a section names one (every one that does agrees).
    pub url: Option<String>,
    /// The globs, in file order (empty: every function).
    pub matches: Vec<String>,
    /// A CA bundle file for `rediss://`.
    pub ca: Option<String>,
    /// Globs of the sections with `route = "gearmonkey"`.
    pub routed: Vec<String>,
}

/// Folds the sections into one declaration; `None` when there are none.
pub(super) fn build(raw: Vec<RawGearmonkey>) -> Result<Option<GearmonkeyDecl>, Bad> {
    if raw.is_empty() {
        return Ok(None);
    }
    let mut out = GearmonkeyDecl::default();
    for section in raw {
        let routed = match section.route {
            None => false,
            Some(r) if r.get_ref() == "gearmonkey" => true,
            Some(r) if r.get_ref() == "auto" => false,
            Some(r) => return bad(
                r.span().start,
                "`route` is \"gearmonkey\" (always GearMonkey's workers) or \"auto\" (the default)",
            ),
        };
        if routed {
            let glob = section
                .pattern
                .as_ref()
                .map_or("*", |p| p.get_ref().as_str());
            out.routed.push(glob.to_owned());
        }
        if let Some(p) = section.pattern {
            if p.get_ref().is_empty() {
                return bad(
                    p.span().start,
                    "`match` must not be empty (leave it out for every function)",
                );
            }
            out.matches.push(p.into_inner());
        }
        if let Some(u) = section.url {
            match &out.url {
                Some(seen) if seen != u.get_ref() => {
                    return bad(u.span().start, "every [[gearmonkey]] `url` must be the same Redis (the bridge talks to one)");
                }
                _ => out.url = Some(u.into_inner()),
            }
        }
        if section.ca.is_some() {
            out.ca = section.ca;
        }
    }
    Ok(Some(out))
}
