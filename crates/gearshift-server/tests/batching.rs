//! Batching sanity: many requests pipelined in one write are all answered,
//! in order, and none is lost between the reader, the engine and the writer.

mod common;

use common::{handle, submit_bg, TestServer, PREFIX};
use gearshift_proto::Response;

const JOBS: u64 = 10_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_pipelined_background_submits() {
    let server = TestServer::start_default().await;
    let client = server.connect().await;

    let mut batch = Vec::new();
    for i in 0..JOBS {
        batch.extend(submit_bg("bulk", "", format!("job-{i}").as_bytes()));
    }
    // Write from one task while reading from this one, so neither side's
    // socket buffer can fill up and stall the other.
    let (mut rd, mut wr) = client.stream.into_split();
    let writer = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        tokio::time::timeout(common::TIMEOUT, wr.write_all(&batch))
            .await
            .expect("write timed out")
            .expect("write failed");
        wr
    });

    let mut buf = bytes::BytesMut::new();
    let mut last = 0u64;
    for i in 1..=JOBS {
        let packet = loop {
            match gearshift_proto::decode_frame(&mut buf, usize::MAX).expect("decodable") {
                Some(gearshift_proto::Frame::Packet(p)) => break p,
                Some(other) => panic!("unexpected {other:?}"),
                None => {
                    use tokio::io::AsyncReadExt;
                    let n = tokio::time::timeout(common::TIMEOUT, rd.read_buf(&mut buf))
                        .await
                        .unwrap_or_else(|_| panic!("timed out after {} JOB_CREATED", i - 1))
                        .expect("read");
                    assert!(n > 0, "closed after {} JOB_CREATED", i - 1);
                }
            }
        };
        let Ok(Response::JobCreated(h)) = Response::parse(&packet) else {
            panic!("expected JOB_CREATED, got {packet:?}");
        };
        let text = std::str::from_utf8(&h).expect("ascii handle");
        let n: u64 = text
            .strip_prefix(PREFIX)
            .and_then(|s| s.strip_prefix(':'))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("odd handle {text}"));
        assert!(n > last, "handle {n} not above {last}");
        assert_eq!(h, handle(i), "handles are numbered in submission order");
        last = n;
    }
    assert!(buf.is_empty(), "extra bytes after the last JOB_CREATED");
    let wr = writer.await.expect("writer task");

    let mut client = common::Conn::from_stream(rd.reunite(wr).expect("same stream"));
    let list = client.admin_list("status").await;
    assert_eq!(list, format!("bulk\t{JOBS}\t0\t0\n.\n"));
    let list = client.admin_list("prioritystatus").await;
    assert_eq!(list, format!("bulk\t0\t{JOBS}\t0\t0\n.\n"));
}
