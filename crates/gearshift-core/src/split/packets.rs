//! The few packets the splitter reads into or writes itself.

use bytes::{Bytes, BytesMut};
use gearshift_proto::frame::{encode_one, encode_parts, Magic};
use gearshift_proto::packet_type::PacketType;

/// A packet to an owner (a request), or to the client (a response).
pub(super) fn packet(magic: Magic, kind: PacketType, parts: &[&[u8]]) -> Bytes {
    let mut out = BytesMut::new();
    encode_parts(magic, kind, parts, &mut out);
    out.freeze()
}

/// A packet as it came, encoded again.
pub(super) fn raw(magic: Magic, kind: PacketType, body: &[u8]) -> Bytes {
    let mut out = BytesMut::new();
    encode_one(magic, kind, body, &mut out);
    out.freeze()
}

/// An admin text line with its end.
pub(super) fn line(text: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(text.len() + 1);
    out.extend_from_slice(text);
    out.extend_from_slice(b"\n");
    out.freeze()
}

/// The first argument of a body (the function, or the handle).
pub(super) fn first_arg(body: &Bytes) -> Bytes {
    match body.iter().position(|&b| b == 0) {
        Some(i) => body.slice(..i),
        None => body.clone(),
    }
}

/// The second argument (STATUS_RES's "known").
pub(super) fn second_arg(body: &[u8]) -> &[u8] {
    let mut parts = body.splitn(3, |&b| b == 0);
    parts.next();
    parts.next().unwrap_or(&[])
}

/// An ERROR to the client.
pub(super) fn error(code: &str, text: &str) -> Bytes {
    packet(
        Magic::Res,
        PacketType::Error,
        &[code.as_bytes(), text.as_bytes()],
    )
}

/// A response without a body.
pub(super) fn bare(kind: PacketType) -> Bytes {
    packet(Magic::Res, kind, &[])
}

/// A STATUS_RES (or STATUS_RES_UNIQUE) for a job no owner knows.
pub(super) fn unknown_status(unique: bool, key: &[u8]) -> Bytes {
    if unique {
        packet(
            Magic::Res,
            PacketType::StatusResUnique,
            &[key, b"0", b"0", b"0", b"0", b"0"],
        )
    } else {
        packet(
            Magic::Res,
            PacketType::StatusRes,
            &[key, b"0", b"0", b"0", b"0"],
        )
    }
}

/// Whether a packet type answers a request (the rest arrive on their own).
pub(super) fn is_reply(kind: PacketType) -> bool {
    use PacketType::*;
    matches!(
        kind,
        JobCreated
            | Error
            | EchoRes
            | StatusRes
            | StatusResUnique
            | OptionRes
            | JobAssign
            | JobAssignUniq
            | JobAssignAll
            | NoJob
    )
}

/// Whether a submission's client waits for the job's end.
pub(super) fn foreground(kind: PacketType) -> bool {
    use PacketType::*;
    matches!(
        kind,
        SubmitJob | SubmitJobHigh | SubmitJobLow | SubmitReduceJob
    )
}
