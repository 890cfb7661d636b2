//! Any interleaving of client bytes, owner bytes, lost or closed owners,
//! ownership changes, parked submissions' retries and a drain through the landing
//! node's splitter: no panic, and what it holds
//! for the client stays within what it was fed.
#![no_main]

use bytes::BytesMut;
use gearshift_core::split::{Out, Owner, Owners, Split};
use libfuzzer_sys::fuzz_target;

/// Three owners; a function's owner is its first byte mod 4 (3: nobody),
/// shifted by the generation so a change moves functions.
struct Fake(u8);

impl Owners for Fake {
    fn owner_of(&self, function: &[u8]) -> Option<Owner> {
        let o = (function.first().copied().unwrap_or(0).wrapping_add(self.0)) % 4;
        (o < 3).then_some(u32::from(o))
    }
    fn all(&self) -> Vec<Owner> {
        vec![0, 1, 2]
    }
    fn local(&self) -> Owner {
        0
    }
}

fuzz_target!(|data: &[u8]| {
    let mut split = Split::new(1 << 12);
    let mut owners = Fake(0);
    let mut client = BytesMut::new();
    let mut from = [BytesMut::new(), BytesMut::new(), BytesMut::new()];
    let mut out = Vec::new();
    let mut fed = 0usize;
    let mut rest = data;
    while let [op, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (chunk, after) = tail.split_at(n);
        rest = after;
        fed += chunk.len();
        match op % 8 {
            0..=2 => {
                client.extend_from_slice(chunk);
                split.from_client(&mut client, &owners, &mut out);
            }
            3..=5 => {
                let k = usize::from(op % 8 - 3);
                from[k].extend_from_slice(chunk);
                split.from_owner(k as Owner, &mut from[k], &owners, &mut out);
            }
            6 => match *len % 4 {
                3 => split.owner_closed(u32::from(*len / 4 % 3), &owners, &mut out),
                k => split.owner_lost(u32::from(k), &owners, &mut out),
            },
            _ => match *len % 4 {
                0 => split.retry_parked(&owners, &mut out),
                1 => split.give_up_parked(&mut out),
                2 => split.drain(),
                _ => {
                    owners.0 = owners.0.wrapping_add(1);
                    split.owners_changed(&owners, &mut out);
                }
            },
        }
        if out.iter().any(|o| matches!(o, Out::Close(_))) {
            return;
        }
        out.clear();
        // Held for the client: what owners sent, plus a few bytes per
        // request waiting (and the splitter's own short answers).
        assert!(split.buffered() <= fed * 64 + 4096, "{} held for {fed} fed", split.buffered());
    }
});
