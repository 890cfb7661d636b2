//! What reading a gearmand queue table in a database server gives, whichever
//! server it is: the rows, the queue's name for the import record, and a
//! fingerprint of every row read.

use super::Row;

/// What was read, and what identifies it for the import marker.
#[derive(Debug)]
pub(super) struct Read {
    /// Every row, in the order gearmand's own replay would see them.
    pub rows: Vec<Row>,
    /// `scheme://user@host:port/db?table=name`: where the table is,
    /// without a password, and the table as the server resolved it.
    pub name: String,
    /// A hash of every row read, in order: the same queue read again gives
    /// the same value.
    pub fingerprint: u64,
}

impl Read {
    /// The rows read from the table `name`, fingerprinted.
    pub fn new(rows: Vec<Row>, name: String) -> Read {
        let mut hash = Fnv::default();
        rows.iter().for_each(|r| hash.row(r));
        Read {
            rows,
            name,
            fingerprint: hash.0,
        }
    }
}

/// FNV-1a, 64 bits: a stable hash (unlike std's) for the import marker.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn bytes(&mut self, b: &[u8]) {
        // The length first, so adjacent fields cannot trade bytes.
        for x in (b.len() as u64).to_le_bytes().iter().chain(b) {
            self.0 = (self.0 ^ u64::from(*x)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn row(&mut self, r: &Row) {
        self.bytes(&r.unique);
        self.bytes(&r.function);
        self.bytes(&[r.priority]);
        self.bytes(&r.data);
        self.bytes(&r.when.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn row(unique: &str, function: &str, data: &str) -> Row {
        Row {
            unique: Bytes::copy_from_slice(unique.as_bytes()),
            function: Bytes::copy_from_slice(function.as_bytes()),
            priority: 1,
            data: Bytes::copy_from_slice(data.as_bytes()),
            when: 0,
        }
    }

    fn hash(rows: &[Row]) -> u64 {
        Read::new(rows.to_vec(), String::new()).fingerprint
    }

    #[test]
    fn the_fingerprint_follows_every_byte_and_field_boundary() {
        let a = [row("u1", "f", "data"), row("u2", "f", "more")];
        assert_eq!(hash(&a), hash(&a.clone()));
        // FNV-1a is fixed: a marker written by one build is read by the next.
        assert_eq!(hash(&[]), 0xcbf2_9ce4_8422_2325);
        let moved = [row("u1", "fd", "ata"), row("u2", "f", "more")];
        assert_ne!(hash(&a), hash(&moved));
        let reordered = [row("u2", "f", "more"), row("u1", "f", "data")];
        assert_ne!(hash(&a), hash(&reordered));
        let mut later = a.clone();
        later[1].when = 1;
        assert_ne!(hash(&a), hash(&later));
    }
}
