//! `--admin-allow`: the networks whose peers may send admin commands that
//! change things (loopback always may). `10.0.0.0/8`, `192.0.2.7`,
//! `2001:db8::/32`.

use std::net::IpAddr;

/// A list of networks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList(Vec<(IpAddr, u8)>);

impl AllowList {
    /// Parses `ADDR[/PREFIX]` items.
    pub fn parse<'a>(items: impl IntoIterator<Item = &'a str>) -> Result<AllowList, String> {
        let mut nets = Vec::new();
        for item in items {
            let (addr, len) = match item.split_once('/') {
                Some((a, l)) => (a, Some(l)),
                None => (item, None),
            };
            let addr: IpAddr = addr
                .parse()
                .map_err(|_| format!("{item:?} is not an address or network like 10.0.0.0/8"))?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let len = match len {
                Some(l) => l
                    .parse::<u8>()
                    .ok()
                    .filter(|&l| l <= max)
                    .ok_or_else(|| format!("{item:?}: the prefix must be 0 to {max}"))?,
                None => max,
            };
            nets.push((addr, len));
        }
        Ok(AllowList(nets))
    }

    /// Whether `ip` is in one of the networks.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|&(net, len)| match (net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => prefix_eq(&n.octets(), &a.octets(), len),
            (IpAddr::V6(n), IpAddr::V6(a)) => prefix_eq(&n.octets(), &a.octets(), len),
            _ => false,
        })
    }
}

/// Whether the first `len` bits of `a` and `b` are equal.
fn prefix_eq(a: &[u8], b: &[u8], len: u8) -> bool {
    let (whole, rest) = (usize::from(len / 8), len % 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    a[whole] & mask == b[whole] & mask
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|_| unreachable!())
    }

    #[test]
    fn networks_match_by_prefix() {
        let l = AllowList::parse(["10.0.0.0/8", "192.0.2.7", "2001:db8::/32", "172.16.0.0/12"])
            .expect("parse");
        assert!(l.contains(ip("10.200.1.1")));
        assert!(!l.contains(ip("11.0.0.1")));
        assert!(l.contains(ip("192.0.2.7")));
        assert!(!l.contains(ip("192.0.2.8")));
        assert!(l.contains(ip("172.31.255.255")));
        assert!(!l.contains(ip("172.32.0.0")));
        assert!(l.contains(ip("2001:db8:1::5")));
        assert!(!l.contains(ip("2001:db9::1")));
        // An IPv4 peer seen through an IPv6 socket.
        assert!(l.contains(ip("::ffff:10.1.2.3")));
        assert!(AllowList::parse(["0.0.0.0/0"])
            .expect("all")
            .contains(ip("8.8.8.8")));
        assert!(!AllowList::default().contains(ip("127.0.0.1")));
    }

    #[test]
    fn bad_items_are_refused() {
        for bad in ["10.0.0.0/33", "nope", "10.0.0.0/x", "::/129", ""] {
            assert!(AllowList::parse([bad]).is_err(), "{bad}");
        }
    }
}
