//! The hub's routing rules on a sink that keeps every output: when a
//! submission's answers go out, and that nothing owed is lost at a close.

use super::*;
use gearshift_core::CoreConfig;
use gearshift_core::Rights;
use gearshift_proto::{Magic, Packet, PacketType};

/// Keeps every output, in order.
struct Collect(Vec<Out>);

impl OutSink for Collect {
    fn push(&mut self, out: Out) {
        self.0.push(out);
    }
}

fn hub() -> Hub {
    let (stop_accepting, _) = watch::channel(false);
    let signals = Signals {
        done: Arc::new(Notify::new()),
        stop_accepting,
        timer: Arc::new(Notify::new()),
    };
    Hub::new(Core::new(CoreConfig::default()), signals)
}

fn open(hub: &mut Hub, id: ConnId, sink: &mut Collect) {
    let info = ConnInfo {
        fd: 3,
        ip: "127.0.0.1".into(),
        port: 0,
        loopback: true,
        rights: Rights::ALL,
        node: None,
        identity: None,
    };
    hub.input(id, Item::Open(info), sink);
}

fn background_submit(n: usize) -> Input {
    let body = Bytes::from(format!("fn\0\0job {n}"));
    let packet = Packet {
        magic: Magic::Req,
        kind: PacketType::SubmitJobBg,
        body,
    };
    match Request::from_packet(packet) {
        Ok(r @ Request::Submit(_)) => Input::Request(r),
        other => panic!("not a plain submission: {other:?}"),
    }
}

/// A hub with connection 1 open and `n` background submissions fed.
fn with_submissions(n: usize) -> (Hub, Collect, ConnId) {
    let mut hub = hub();
    let mut sink = Collect(Vec::new());
    let a = ConnId(1);
    open(&mut hub, a, &mut sink);
    for i in 0..n {
        hub.request(a, background_submit(i), &mut sink);
    }
    (hub, sink, a)
}

fn created_for(outs: &[Out], id: ConnId) -> usize {
    outs.iter()
        .filter(|o| matches!(o, Out::Created(c, _) if *c == id))
        .count()
}

#[test]
fn answers_to_submissions_wait_for_the_round_and_keep_their_order() {
    let mut hub = hub();
    let mut sink = Collect(Vec::new());
    let (a, b) = (ConnId(1), ConnId(2));
    open(&mut hub, a, &mut sink);
    open(&mut hub, b, &mut sink);
    for n in 0..3 {
        hub.request(a, background_submit(n), &mut sink);
    }
    // Not routed yet: a few submissions wait for the round's end.
    assert_eq!(created_for(&sink.0, a), 0);
    // Any other input routes what waits first, in the order it was made.
    hub.request(
        b,
        Input::Request(Request::Echo(Bytes::from_static(b"x"))),
        &mut sink,
    );
    let order: Vec<ConnId> = sink.0.iter().map(Out::conn).collect();
    assert_eq!(order, vec![a, a, a, b]);
    let ids: Vec<JobId> = sink
        .0
        .iter()
        .filter_map(|o| match o {
            Out::Created(_, job) => Some(*job),
            _ => None,
        })
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "in submission order");
}

#[test]
fn a_long_pipeline_is_routed_before_the_list_grows_past_its_bound() {
    let (_hub, sink, a) = with_submissions(ROUTE_AFTER);
    assert_eq!(created_for(&sink.0, a), ROUTE_AFTER);
}

#[test]
fn a_submitter_that_closes_still_gets_its_answers_before_the_close() {
    let (mut hub, mut sink, a) = with_submissions(5);
    // Its submissions and its end arrive in one batch (several I/O
    // threads), with no settle between them.
    hub.input(a, Item::Closed, &mut sink);
    let kinds: Vec<&str> = sink
        .0
        .iter()
        .map(|o| match o {
            Out::Created(..) => "created",
            Out::Close(_) => "close",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        ["created"; 5]
            .iter()
            .copied()
            .chain(["close"])
            .collect::<Vec<_>>()
    );
}

#[test]
fn finishing_routes_what_waits_before_closing_everyone() {
    let (mut hub, mut sink, a) = with_submissions(1);
    let _ = hub.finish(&mut sink);
    assert!(matches!(sink.0.first(), Some(Out::Created(c, _)) if *c == a));
    assert!(matches!(sink.0.last(), Some(Out::Close(c)) if *c == a));
}

/// A hub told to stop (`graceful` or not), then a connection opening.
fn opened_while_stopping(graceful: bool) -> (Hub, Collect, ConnId) {
    let mut hub = hub();
    let mut sink = Collect(Vec::new());
    hub.begin_shutdown(graceful);
    let late = ConnId(7);
    open(&mut hub, late, &mut sink);
    (hub, sink, late)
}

#[test]
fn a_connection_opened_during_a_graceful_drain_is_served_under_its_rules() {
    let (mut hub, mut sink, late) = opened_while_stopping(true);
    assert!(sink.0.is_empty(), "not closed: {:?}", sink.0);
    hub.request(
        late,
        Input::Request(Request::Grab(gearshift_proto::GrabKind::Plain)),
        &mut sink,
    );
    assert!(matches!(&sink.0[..], [Out::Send(c, Response::NoJob)] if *c == late));
}

#[test]
fn a_connection_opened_during_a_hard_stop_is_closed() {
    let (_hub, sink, late) = opened_while_stopping(false);
    assert!(matches!(&sink.0[..], [Out::Close(c)] if *c == late));
}

/// A partitioned node's hub that serves only the function `fn`, with
/// one connection open.
fn owning_fn_only() -> (Hub, Collect, ConnId) {
    let mut hub = hub();
    hub.set_owned(Arc::new(|f: &[u8]| f == b"fn"));
    let mut sink = Collect(Vec::new());
    let a = ConnId(1);
    open(&mut hub, a, &mut sink);
    (hub, sink, a)
}

/// A partitioned node's job server takes submissions only for its own
/// functions: another's is refused before it reaches the store.
#[test]
fn submissions_for_functions_owned_elsewhere_are_refused() {
    let (mut hub, mut sink, a) = owning_fn_only();
    hub.request(a, background_submit(0), &mut sink);
    let other = Packet {
        magic: Magic::Req,
        kind: PacketType::SubmitJobBg,
        body: Bytes::from_static(b"elsewhere\0\0x"),
    };
    let other = Request::from_packet(other).expect("a submission");
    hub.request(a, Input::Request(other), &mut sink);
    hub.request(
        a,
        Input::Request(Request::Echo(Bytes::from_static(b"x"))),
        &mut sink,
    );
    assert_eq!(created_for(&sink.0, a), 1);
    let refused = sink.0.iter().any(|o| {
        matches!(o, Out::Send(c, Response::Error { code, .. }) if *c == a && code == "QUEUE_ERROR")
    });
    assert!(
        refused,
        "the other function's submission is refused: {:?}",
        sink.0
    );
}

/// A hub whose lease lapsed runs no control call (a partitioned node's
/// moves then start its job server again instead of working on a core
/// whose effects are all dropped); a trusted one does.
#[test]
fn a_fenced_hub_runs_no_control_call() {
    let mut hub = hub();
    let trust = Arc::new(LeaseTrust::new(
        Instant::now() + std::time::Duration::from_secs(60),
    ));
    hub.set_lease(trust.clone());
    let mut sink = Collect(Vec::new());
    let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let call = |ran: &Arc<std::sync::atomic::AtomicUsize>| -> ToHub {
        let ran = ran.clone();
        ToHub::Call(Box::new(move |_core| {
            ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }))
    };
    hub.message(call(&ran), &mut sink);
    assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 1);
    trust.revoke();
    hub.message(call(&ran), &mut sink);
    // Trusted again later: still fenced (it may have dropped effects).
    trust.extend(Instant::now() + std::time::Duration::from_secs(60));
    hub.message(call(&ran), &mut sink);
    assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// An admin line about a function another node's partition holds (it
/// raced a move) is refused, in its place; one about an owned function,
/// and lines about no function, are answered as usual.
#[test]
fn admin_lines_about_functions_owned_elsewhere_are_refused() {
    use gearshift_proto::admin::AdminCommand;
    let (mut hub, mut sink, a) = owning_fn_only();
    let admin = |c: AdminCommand| Input::Admin(Box::new(c));
    hub.request(
        a,
        admin(AdminCommand::Pause(Bytes::from_static(b"elsewhere"))),
        &mut sink,
    );
    hub.request(
        a,
        admin(AdminCommand::CreateFunction(Bytes::from_static(b"fn"))),
        &mut sink,
    );
    hub.request(a, admin(AdminCommand::Version), &mut sink);
    hub.settle(&mut sink);
    let texts: Vec<&Bytes> = sink
        .0
        .iter()
        .filter_map(|o| match o {
            Out::Text(c, t) if *c == a => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert_eq!(&texts[0][..], gearshift_core::split::ADMIN_NOT_OWNER);
    assert_eq!(&texts[1][..], b"OK\r\n");
    assert!(!texts[2].starts_with(b"ERR"), "{:?}", texts[2]);
    assert!(hub
        .core
        .functions_view()
        .iter()
        .all(|f| &f.name[..] != b"elsewhere"));
}

/// A worker's CAN_DO that raced a function's move away is taken; once the
/// worker gives the ability up (CANT_DO, RESET_ABILITIES or closing), no
/// empty entry stays behind to be listed beside the owner's. One still
/// wanted by another worker stays.
#[test]
fn a_function_given_up_here_after_its_move_is_forgotten() {
    let req = |r: Request| Input::Request(r);
    let name = |f: &'static [u8]| Bytes::from_static(f);
    let listed = |hub: &Hub| -> Vec<Bytes> {
        let mut v: Vec<Bytes> = (hub.core.functions_view().into_iter())
            .map(|f| f.name)
            .collect();
        v.sort();
        v
    };
    let gives_up: [fn(&mut Hub, ConnId, &mut Collect); 3] = [
        |hub, a, sink| {
            let cant = |f| Input::Request(Request::CantDo(Bytes::from_static(f)));
            hub.request(a, cant(b"elsewhere"), sink);
            hub.request(a, cant(b"also"), sink);
            hub.request(a, cant(b"fn"), sink);
        },
        |hub, a, sink| hub.request(a, Input::Request(Request::ResetAbilities), sink),
        |hub, a, sink| hub.input(a, Item::Closed, sink),
    ];
    for (how, give_up) in gives_up.into_iter().enumerate() {
        let (mut hub, mut sink, a) = owning_fn_only();
        let b = ConnId(2);
        open(&mut hub, b, &mut sink);
        for f in [&b"elsewhere"[..], b"also", b"fn"] {
            hub.request(a, req(Request::CanDo(Bytes::from_static(f))), &mut sink);
        }
        hub.request(b, req(Request::CanDo(name(b"also"))), &mut sink);
        hub.settle(&mut sink);
        let all = vec![name(b"also"), name(b"elsewhere"), name(b"fn")];
        assert_eq!(listed(&hub), all);
        give_up(&mut hub, a, &mut sink);
        hub.settle(&mut sink);
        // The function served here stays listed, as gearmand keeps it.
        let left = vec![name(b"also"), name(b"fn")];
        assert_eq!(listed(&hub), left, "way {how}");
        hub.input(b, Item::Closed, &mut sink);
        hub.settle(&mut sink);
        assert_eq!(listed(&hub), vec![name(b"fn")], "way {how}");
    }
}
