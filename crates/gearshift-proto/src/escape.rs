//! Client-chosen bytes in admin listings (function names, unique ids,
//! client ids, handles restored from a store): the one rule that keeps a
//! listing one line per entry, whatever the state holds.
//!
//! [`push_field`] writes control bytes (below 0x20, and 0x7f) and the
//! listing's own separator as `\xNN`; every other byte, backslash included,
//! goes out as is, so printable names read exactly as gearmand prints them.
//! Names themselves are accepted as gearmand accepts them (Perl's prefixed
//! names carry a TAB): escaping on the way out is the whole rule.

/// How a listing separates the fields of a line, which decides what a
/// field may not carry raw besides control bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sep {
    /// TAB-separated columns (`status`, `prioritystatus`, `show jobs`).
    Tab,
    /// Space-separated columns (`workers`): a space is escaped too.
    Space,
    /// The field is the whole line (`show unique jobs`): a lone `.` is
    /// escaped too, since that line ends a listing.
    Line,
}

/// A byte no listing carries raw: C0 controls (LF, CR, NUL, TAB…) and DEL.
pub fn is_control(b: u8) -> bool {
    b < 0x20 || b == 0x7f
}

/// Whether a field holds a byte [`is_control`] names.
pub fn has_control(field: &[u8]) -> bool {
    field.iter().any(|&b| is_control(b))
}

/// Appends `field` to a listing line whose fields are separated by `sep`,
/// escaping what could split the line or its columns.
pub fn push_field(out: &mut Vec<u8>, field: &[u8], sep: Sep) {
    let escaped = |b: u8| is_control(b) || (sep == Sep::Space && b == b' ');
    if sep == Sep::Line && field == b"." {
        push_hex(out, b'.');
        return;
    }
    let mut rest = field;
    while let Some(at) = rest.iter().position(|&b| escaped(b)) {
        out.extend_from_slice(&rest[..at]);
        push_hex(out, rest[at]);
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
}

/// `\xNN`, lower-case hex.
fn push_hex(out: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(&[
        b'\\',
        b'x',
        HEX[usize::from(b >> 4)],
        HEX[usize::from(b & 0xf)],
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn esc(field: &[u8], sep: Sep) -> Vec<u8> {
        let mut out = Vec::new();
        push_field(&mut out, field, sep);
        out
    }

    #[test]
    fn printable_names_pass_unchanged() {
        for sep in [Sep::Tab, Sep::Space, Sep::Line] {
            for name in [
                &b"reverse"[..],
                b"App\\Jobs\\Mail",
                b"a.b-c_d:e/f",
                b"~!@#$%^&*()",
                b"",
                "caf\u{e9}".as_bytes(),
            ] {
                assert_eq!(esc(name, sep), name, "{sep:?}");
            }
        }
        // A space is ordinary where it separates nothing.
        assert_eq!(esc(b"my func", Sep::Tab), b"my func");
        assert_eq!(esc(b"my func", Sep::Line), b"my func");
    }

    #[test]
    fn control_bytes_become_hex() {
        assert_eq!(esc(b"a\nb", Sep::Tab), b"a\\x0ab");
        assert_eq!(esc(b"\0f", Sep::Tab), b"\\x00f");
        assert_eq!(esc(b"f\r\n", Sep::Line), b"f\\x0d\\x0a");
        assert_eq!(esc(b"\tx\t", Sep::Tab), b"\\x09x\\x09");
        assert_eq!(esc(b"\x1b[2J\x7f", Sep::Space), b"\\x1b[2J\\x7f");
        // Bytes from 0x80 up are text in some encoding, not controls.
        assert_eq!(esc(b"\x80\xff", Sep::Tab), b"\x80\xff");
        for b in (0u8..0x20).chain([0x7f]) {
            assert_eq!(esc(&[b], Sep::Tab), format!("\\x{b:02x}").into_bytes());
        }
    }

    #[test]
    fn each_listing_escapes_its_own_separator() {
        assert_eq!(esc(b"a b", Sep::Space), b"a\\x20b");
        assert_eq!(esc(b".", Sep::Line), b"\\x2e");
        assert_eq!(esc(b"..", Sep::Line), b"..");
        assert_eq!(esc(b".", Sep::Tab), b".");
    }

    #[test]
    fn no_byte_can_split_a_line_or_a_column() {
        let all: Vec<u8> = (0..=255).collect();
        for sep in [Sep::Tab, Sep::Space, Sep::Line] {
            let out = esc(&all, sep);
            assert!(!out.iter().any(|&b| is_control(b)), "{sep:?}");
            assert_eq!(out.contains(&b' '), sep != Sep::Space);
        }
    }

    #[test]
    fn which_bytes_are_controls() {
        assert!(has_control(b"a\x00"));
        assert!(has_control(b"\x1f"));
        assert!(has_control(b"\x7f"));
        assert!(!has_control(b" ~\x80"));
        assert!(!has_control(b""));
    }
}
