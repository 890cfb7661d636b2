//! What the client reports when a server turns a connection away: an
//! ERROR sent just before the server closes (a packet over its size limit,
//! refused while the client is still writing it), a TLS port reached over
//! plain TCP, and addresses that cannot be used at all.

use std::time::Duration;

use gearshift_client::{AdminClient, Client, Error, Worker};
use gearshift_server::{Server, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The alert a rustls server sends for a first packet that is no TLS
/// record (fatal, decode_error), as `gearshift serve --ssl` does.
const TLS_ALERT: &[u8] = &[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32];

/// An in-process Gearshift whose packets may be at most `max_packet` bytes.
async fn server_with_max_packet(max_packet: usize) -> std::net::SocketAddr {
    let server = Server::bind(ServerConfig {
        listen: vec!["127.0.0.1:0".parse().expect("addr")],
        max_packet_size: max_packet,
        ..Default::default()
    })
    .await
    .expect("bind");
    let addr = server.local_addrs()[0];
    tokio::spawn(server.run(std::future::pending()));
    addr
}

/// A listener that answers every connection's first bytes with a TLS
/// alert and closes, like a TLS port.
async fn fake_tls_port() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                if tcp.read(&mut buf).await.is_ok() {
                    let _ = tcp.write_all(TLS_ALERT).await;
                }
            });
        }
    });
    addr
}

async fn bounded<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .expect("finished in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_request_reports_the_servers_error() {
    let addr = server_with_max_packet(1024).await;
    let payload = vec![b'x'; 4 << 20];
    // The server answers ERROR and closes while the client still writes;
    // the reply must win over the broken pipe, every time.
    for round in 0..4 {
        let client = Client::builder().server(addr).build().expect("client");
        let results = [
            bounded(client.job("big", payload.clone()).background())
                .await
                .map(drop),
            bounded(client.job("big", payload.clone()).submit())
                .await
                .map(drop),
        ];
        for r in results {
            match r {
                Err(Error::Server { code, text }) => {
                    assert_eq!(code, "ARGUMENT_TOO_LARGE", "round {round}");
                    assert!(text.contains("exceeds the maximum of 1024"), "{text}");
                }
                other => panic!("round {round}: expected the server's ERROR, got {other:?}"),
            }
        }
    }
    // The connection is gone, the server is not: a small job still goes in.
    let client = Client::builder().server(addr).build().expect("client");
    bounded(client.submit_background("small", "x"))
        .await
        .expect("a small job is queued");
}

#[tokio::test]
async fn plain_tcp_to_a_tls_port_says_so() {
    let tls = fake_tls_port().await;
    let client = Client::builder().server(tls).build().expect("client");
    match bounded(client.submit_background("f", "x")).await {
        Err(Error::NoServerAvailable { last }) => {
            assert_eq!(
                last,
                format!("{tls} serves TLS (it answered plain TCP with a TLS alert)")
            )
        }
        other => panic!("expected no server, got {other:?}"),
    }
    let mut admin = AdminClient::connect(tls).await.expect("TCP connect");
    match bounded(admin.version()).await {
        Err(e @ Error::TlsPort { .. }) => assert!(e.to_string().contains("serves TLS"), "{e}"),
        other => panic!("expected TlsPort, got {other:?}"),
    }
    assert!(!Error::TlsPort {
        addr: tls.to_string()
    }
    .is_transient());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_port_among_servers_is_skipped() {
    let tls = fake_tls_port().await;
    let plain = server_with_max_packet(1 << 20).await;
    // Round-robin starts at the TLS port: the request never counted there,
    // so even a background job moves on to the next server.
    let client = Client::builder()
        .servers([tls, plain])
        .build()
        .expect("client");
    for _ in 0..3 {
        let handle = bounded(client.submit_background("f", "x"))
            .await
            .expect("queued on the plain server");
        assert_eq!(handle.server(), 1);
    }
}

#[test]
fn unusable_addresses_are_refused_by_the_builders() {
    let client = Client::builder().server("127.0.0.1:99999").build();
    match client {
        Err(Error::InvalidArgument(why)) => {
            assert_eq!(why, "invalid port 99999 in 127.0.0.1:99999 (1-65535)")
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    let worker = Worker::builder()
        .server("h:0")
        .function("f", |_job| async {
            Ok::<_, gearshift_client::WorkError>("")
        })
        .build();
    assert!(
        matches!(&worker, Err(Error::InvalidArgument(why)) if why.contains("invalid port 0")),
        "{worker:?}"
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let admin = rt.block_on(AdminClient::connect("[::1]:70000"));
    assert!(
        matches!(&admin, Err(Error::InvalidArgument(why)) if why.contains("invalid port 70000")),
        "{admin:?}"
    );
}
