//! Two connections talking through a lossy pipe of segments, without time: what arrives is
//! what was written, losses are repaired, and windows are respected.

use super::*;

const MSS: u64 = 1000;

fn limits(receive_window: u64) -> Limits {
    Limits {
        mss: MSS,
        receive_window,
        send_buffer: 1 << 20,
    }
}

/// A client and a server, established.
fn pair(receive_window: u64) -> (Connection, Connection) {
    let mut client = Connection::client(limits(receive_window));
    let mut server = Connection::server(limits(receive_window), 0, receive_window);
    let syn_ack = Segment {
        src_port: 0,
        dst_port: 0,
        flags: flags::SYN | flags::ACK,
        window: receive_window as u32,
        seq: 0,
        ack: 1,
        payload: Vec::new(),
    };
    let r = client.on_segment(&syn_ack);
    assert!(r.ack_now && r.sender_may_proceed);
    assert_eq!(client.phase(), Phase::Established);
    let ack = client.acknowledgement();
    server.on_segment(&ack);
    (client, server)
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

/// Runs the exchange until nothing moves: the client sends what its windows allow, the server
/// answers; `lose(n)` drops the n-th data segment sent. Returns what the server's reader got.
fn run(client: &mut Connection, server: &mut Connection, lose: impl Fn(u64) -> bool) -> Vec<u8> {
    let mut got = Vec::new();
    let mut sent = 0u64;
    for _round in 0..10_000 {
        let mut moved = false;
        let mut acks = Vec::new();
        while let Some(seg) = client.next_segment() {
            moved = true;
            sent += 1;
            if lose(sent) {
                continue;
            }
            if server.on_segment(&seg).ack_now {
                acks.push(server.acknowledgement());
            }
        }
        if server.owes_acknowledgement() {
            acks.push(server.acknowledgement());
        }
        let mut buf = vec![0u8; 4096];
        loop {
            let (n, update) = server.take_received(&mut buf);
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            if update {
                acks.push(server.acknowledgement());
            }
        }
        for a in &acks {
            moved = true;
            client.on_segment(a);
        }
        if !moved && (client.all_acknowledged() || !client.on_timeout()) {
            break;
        }
    }
    got
}

#[test]
fn written_bytes_arrive_in_order_and_are_all_acknowledged() {
    let (mut c, mut s) = pair(64 * MSS);
    let data = pattern(50_000);
    c.queue_data(&data);
    let got = run(&mut c, &mut s, |_| false);
    assert_eq!(got, data);
    assert!(c.all_acknowledged());
    assert_eq!(c.retransmissions(), 0);
}

#[test]
fn a_lost_segment_is_sent_again_after_three_duplicate_acknowledgements() {
    let (mut c, mut s) = pair(64 * MSS);
    let data = pattern(30_000);
    c.queue_data(&data);
    let got = run(&mut c, &mut s, |n| n == 3);
    assert_eq!(got, data);
    assert!(c.all_acknowledged());
    assert_eq!(c.retransmissions(), 1, "one fast retransmit, no timeout");
}

#[test]
fn a_lost_tail_is_sent_again_when_the_timer_expires() {
    let (mut c, mut s) = pair(64 * MSS);
    let data = pattern(2_500);
    c.queue_data(&data);
    // The last of three segments is lost: no later segment makes duplicate acknowledgements.
    let got = run(&mut c, &mut s, |n| n == 3);
    assert_eq!(got, data);
    assert!(c.all_acknowledged());
    assert_eq!(c.retransmissions(), 1);
}

#[test]
fn the_sender_keeps_to_the_receivers_window_until_the_reader_frees_it() {
    let (mut c, mut s) = pair(3 * MSS);
    c.queue_data(&pattern(10 * MSS as usize));
    let mut sent = 0;
    while let Some(seg) = c.next_segment() {
        sent += seg.payload.len() as u64;
        s.on_segment(&seg);
    }
    assert_eq!(sent, 3 * MSS, "a full window and no more");
    let ack = s.acknowledgement();
    assert_eq!(ack.window, 0);
    c.on_segment(&ack);
    assert_eq!(c.next_segment(), None, "the window is closed");
    // The reader takes everything: the window reopens, and the update says so.
    let mut buf = vec![0u8; 4 * MSS as usize];
    let (n, update) = s.take_received(&mut buf);
    assert_eq!((n as u64, update), (3 * MSS, true));
    c.on_segment(&s.acknowledgement());
    assert!(c.next_segment().is_some());
}

#[test]
fn a_closed_window_whose_update_was_lost_is_probed_with_one_byte() {
    let (mut c, mut s) = pair(2 * MSS);
    c.queue_data(&pattern(5 * MSS as usize));
    while let Some(seg) = c.next_segment() {
        s.on_segment(&seg);
    }
    c.on_segment(&s.acknowledgement());
    let mut buf = vec![0u8; 4 * MSS as usize];
    s.take_received(&mut buf); // the window update is lost
    assert_eq!(c.next_segment(), None);
    assert!(
        c.on_timeout(),
        "a closed window with data waiting is probed"
    );
    let probe = c.next_segment().expect("a probe");
    assert_eq!(probe.payload.len(), 1);
    // The window had reopened, so the byte is taken as data (acknowledged when the
    // segments waiting run out).
    assert!(s.on_segment(&probe).readable);
    assert!(s.owes_acknowledgement());
    c.on_segment(&s.acknowledgement());
    assert!(c.next_segment().is_some(), "the reply reopened the window");
}

#[test]
fn out_of_order_data_is_dropped_and_answered_with_the_expected_number() {
    let (_, mut s) = pair(64 * MSS);
    let early = Segment {
        src_port: 0,
        dst_port: 0,
        flags: flags::ACK,
        window: 1000,
        seq: 1 + MSS,
        ack: 1,
        payload: vec![1; MSS as usize],
    };
    let r = s.on_segment(&early);
    assert!(r.ack_now && !r.readable);
    assert_eq!(s.acknowledgement().ack, 1);
}

#[test]
fn the_fin_ends_the_stream_after_the_data_and_is_acknowledged() {
    let (mut c, mut s) = pair(64 * MSS);
    c.queue_data(b"last words");
    c.queue_fin();
    assert!(!c.all_acknowledged());
    let got = run(&mut c, &mut s, |_| false);
    assert_eq!(got, b"last words");
    assert!(s.at_end());
    assert!(c.all_acknowledged());
    assert_eq!(c.next_segment(), None, "the FIN is not sent twice");
}

#[test]
fn a_reset_ends_the_connection() {
    let (mut c, _) = pair(64 * MSS);
    let rst = Segment {
        src_port: 0,
        dst_port: 0,
        flags: flags::RST,
        window: 0,
        seq: 0,
        ack: 0,
        payload: Vec::new(),
    };
    let r = c.on_segment(&rst);
    assert!(r.sender_may_proceed && r.readable);
    assert_eq!(c.phase(), Phase::Reset);
    c.queue_data(b"x");
    assert_eq!(c.next_segment(), None);
}
