//! `gearshift check --repair` run as root on a store a service user owns:
//! the repaired file keeps the damaged one's owner and mode, so the server
//! (running as that user) opens it. Changing a file's owner takes root, so
//! the test is ignored unless asked for (`-- --ignored`; scripts/test.sh
//! does as root).

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use gearshift_store::conformance::{job, live_ids};
use gearshift_store::log::salvage;
use gearshift_store::log::{FILE_NAME, SYNCED_FILE_NAME};
use gearshift_store::{Durability, LogOptions, LogStore, Store};

#[test]
#[ignore = "changing a file's owner takes root: run with --ignored as root"]
fn a_repair_keeps_the_owner_and_mode_of_the_damaged_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = LogOptions {
        durability: Durability::Interval(std::time::Duration::from_secs(3600)),
        ..LogOptions::default()
    };
    let mut frames = Vec::new();
    {
        let mut s = LogStore::open(dir.path(), opts).expect("open");
        s.replay().expect("replay");
        for id in 1..=3 {
            let start = s.file_len() as usize;
            s.add(&job(id, "f", "", 1, b"data"));
            s.flush().expect("flush");
            frames.push(start..s.file_len() as usize);
        }
    }
    let path = dir.path().join(FILE_NAME);
    let mut raw = std::fs::read(&path).expect("read");
    raw[frames[1].end - 1] ^= 0x55;
    std::fs::write(&path, &raw).expect("write");
    // Damage no sync vouches for stays corruption (not a tear to cut).
    std::fs::remove_file(dir.path().join(SYNCED_FILE_NAME)).expect("remove the marker");
    // The service user's file (nobody's, here).
    std::os::unix::fs::chown(&path, Some(65534), Some(65534)).expect("chown (as root)");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");

    salvage::repair(dir.path(), 100_000)
        .expect("repair")
        .expect("repaired");
    let now = std::fs::metadata(&path).expect("metadata");
    assert_eq!((now.uid(), now.gid()), (65534, 65534));
    assert_eq!(now.mode() & 0o777, 0o640);
    let mut s = LogStore::open(dir.path(), opts).expect("opens");
    let ids = live_ids(&mut s);
    assert_eq!(ids, vec![1, 3]);
}
