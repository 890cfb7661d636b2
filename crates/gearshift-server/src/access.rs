//! Who may do what: the config file's `[access]` lists, matched against a
//! peer's address and its TLS client certificate, give each connection its
//! [`Rights`] when it opens. A list is made of `"*"` (anyone),
//! `"loopback"`, networks (`"10.0.0.0/8"`, `"192.0.2.7"`), `"cert:*"` (any
//! verified client certificate) and `"cert:SUBJECT"` (a whole subject such
//! as `"CN=app,O=Acme"`, or one attribute of it such as `"CN=app"`). A list
//! left out allows anyone, but `admin_change`, which allows loopback and
//! `--admin-allow`; loopback peers may always make admin changes.

use std::net::IpAddr;
use std::sync::{Arc, RwLock};

use gearshift_core::Rights;

use crate::allow::AllowList;

/// One item of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// Any peer.
    Anyone,
    /// A loopback address.
    Loopback,
    /// An address in these networks.
    Nets(AllowList),
    /// Any peer that presented a verified client certificate.
    AnyCert,
    /// A certificate whose subject is this, or has this attribute.
    Cert(String),
}

impl Who {
    /// Parses one list item; the error says what is wrong with it.
    pub fn parse(item: &str) -> Result<Who, String> {
        let item = item.trim();
        Ok(match item {
            "*" => Who::Anyone,
            "loopback" => Who::Loopback,
            "cert:*" => Who::AnyCert,
            _ => match item.strip_prefix("cert:") {
                Some("") => return Err("\"cert:\" needs a subject, like \"cert:CN=app\"".into()),
                Some(subject) => Who::Cert(subject.to_owned()),
                None => Who::Nets(AllowList::parse([item]).map_err(|e| {
                    format!("{e} (or \"*\", \"loopback\", \"cert:*\", \"cert:CN=name\")")
                })?),
            },
        })
    }

    fn admits(&self, ip: IpAddr, identity: Option<&str>) -> bool {
        match self {
            Who::Anyone => true,
            Who::Loopback => ip.to_canonical().is_loopback(),
            Who::Nets(n) => n.contains(ip),
            Who::AnyCert => identity.is_some(),
            Who::Cert(want) => identity.is_some_and(|got| subject_matches(got, want)),
        }
    }
}

/// A subject matches the whole text, or one of its `KEY=VALUE` parts.
fn subject_matches(subject: &str, want: &str) -> bool {
    subject == want || subject.split(',').any(|part| part.trim() == want)
}

/// Who may submit, work, read and change; `None` lists use the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessRules {
    /// Who may submit jobs and ask their status.
    pub submit: Option<Vec<Who>>,
    /// Who may register functions and take jobs.
    pub work: Option<Vec<Who>>,
    /// Who may send read-only admin commands (and read the HTTP API).
    pub admin_read: Option<Vec<Who>>,
    /// Who may send admin commands that change things (and change through
    /// the HTTP API), besides loopback.
    pub admin_change: Option<Vec<Who>>,
    /// `--admin-allow`: networks that may change, whatever the file says.
    pub admin_allow: AllowList,
}

impl AccessRules {
    /// The rights of a peer at `ip` with the TLS `identity`, if any.
    pub fn rights(&self, ip: IpAddr, identity: Option<&str>) -> Rights {
        let any = |list: &Option<Vec<Who>>| match list {
            None => true,
            Some(items) => items.iter().any(|w| w.admits(ip, identity)),
        };
        let loopback = ip.to_canonical().is_loopback();
        let change = loopback
            || self.admin_allow.contains(ip)
            || self
                .admin_change
                .as_ref()
                .is_some_and(|items| items.iter().any(|w| w.admits(ip, identity)));
        Rights {
            submit: any(&self.submit),
            work: any(&self.work),
            read: any(&self.admin_read),
            change,
        }
    }
}

/// The rules in force, replaced by a config reload; a connection keeps the
/// rights it got when it opened.
#[derive(Debug, Default)]
pub struct AccessCell(RwLock<Arc<AccessRules>>);

impl AccessCell {
    /// A cell holding `rules`.
    pub fn new(rules: AccessRules) -> Self {
        AccessCell(RwLock::new(Arc::new(rules)))
    }

    /// The rules in force.
    pub fn get(&self) -> Arc<AccessRules> {
        match self.0.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Puts `rules` in force for connections that open from now on.
    pub fn set(&self, rules: AccessRules) {
        let rules = Arc::new(rules);
        match self.0.write() {
            Ok(mut g) => *g = rules,
            Err(poisoned) => *poisoned.into_inner() = rules,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|_| unreachable!())
    }

    fn list(items: &[&str]) -> Option<Vec<Who>> {
        Some(
            items
                .iter()
                .map(|i| Who::parse(i).unwrap_or_else(|e| unreachable!("{e}")))
                .collect(),
        )
    }

    #[test]
    fn without_rules_everyone_works_and_only_loopback_changes() {
        let r = AccessRules::default();
        assert_eq!(r.rights(ip("127.0.0.1"), None), Rights::ALL);
        assert_eq!(r.rights(ip("::1"), None), Rights::ALL);
        assert_eq!(r.rights(ip("10.0.0.1"), None), Rights::NO_CHANGES);
        let r = AccessRules {
            admin_allow: AllowList::parse(["10.0.0.0/8"]).unwrap_or_default(),
            ..AccessRules::default()
        };
        assert_eq!(r.rights(ip("10.0.0.1"), None), Rights::ALL);
        assert_eq!(r.rights(ip("11.0.0.1"), None), Rights::NO_CHANGES);
    }

    #[test]
    fn lists_match_networks_loopback_and_certificates() {
        let r = AccessRules {
            submit: list(&["10.1.0.0/16", "cert:CN=app"]),
            work: list(&["cert:*"]),
            admin_read: list(&["loopback", "192.0.2.9"]),
            admin_change: list(&["cert:CN=ops,O=Acme"]),
            admin_allow: AllowList::default(),
        };
        let far = r.rights(ip("10.2.0.1"), None);
        assert_eq!(
            far,
            Rights {
                submit: false,
                work: false,
                read: false,
                change: false
            }
        );
        let near = r.rights(ip("10.1.3.4"), None);
        assert!(near.submit && !near.work && !near.read && !near.change);
        let app = r.rights(ip("10.2.0.1"), Some("CN=app,O=Acme"));
        assert!(app.submit && app.work && !app.read && !app.change);
        let ops = r.rights(ip("10.2.0.1"), Some("CN=ops,O=Acme"));
        assert!(!ops.submit && ops.work && ops.change);
        let local = r.rights(ip("127.0.0.1"), None);
        assert!(!local.submit && local.read && local.change);
        assert!(r.rights(ip("192.0.2.9"), None).read);
    }

    #[test]
    fn bad_items_say_what_is_wrong() {
        assert!(Who::parse("cert:").is_err());
        let e = Who::parse("10.0.0.0/33").err().unwrap_or_default();
        assert!(e.contains("prefix"), "{e}");
        let e = Who::parse("everyone").err().unwrap_or_default();
        assert!(e.contains("loopback"), "{e}");
    }

    #[test]
    fn a_reload_replaces_the_rules() {
        let cell = AccessCell::new(AccessRules::default());
        assert!(cell.get().rights(ip("10.0.0.1"), None).submit);
        cell.set(AccessRules {
            submit: list(&["loopback"]),
            ..AccessRules::default()
        });
        assert!(!cell.get().rights(ip("10.0.0.1"), None).submit);
    }
}
