//! Every way a server's etcd session can end, on a real 3-member etcd cluster, each server
//! reaching every member through a [`LinkProxy`] a test can cut: a session that lapsed while
//! the server was cut off, one revoked, keep-alive streams broken, members switched. Each ends
//! with a server that leads again (or keeps leading), and throughout, leaderships never
//! overlap: a server whose session may lapse has stopped leading before another is elected,
//! and a server that does not lead cannot write.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{LinkMode, LinkProxy};
use drover_etcd::election::{Candidate, Election, Leadership};
use drover_etcd::{EtcdConfig, EtcdKv, Follower, follow};
use drover_state::{EngineOptions, StateStore};
use drover_structs::Node;
use tokio::time::Instant;

const NOW: i64 = 1_700_000_000_000_000_000;
/// Short enough for quick tests, long enough for a loaded machine: the keep-alive attempts get
/// 600 ms each, the leader steps down 2.5 s after its last renewal.
const TTL: Duration = Duration::from_secs(3);

fn node(id: &str) -> Node {
    Node {
        id: id.to_owned(),
        secret_id: "secret".to_owned(),
        name: format!("node-{id}"),
        datacenter: "dc1".to_owned(),
        status: "ready".to_owned(),
        scheduling_eligibility: "eligible".to_owned(),
        ..Node::default()
    }
}

/// When each server led: `(name, from, until)`, `until` `None` while it still leads. Recorded
/// by a task per server as its view changes.
#[derive(Clone, Default)]
struct LeadershipLog(Arc<Mutex<Vec<Term>>>);

/// One server's time as leader: its name, from, and until (`None` while it still leads).
type Term = (String, Instant, Option<Instant>);

impl LeadershipLog {
    fn watch(&self, name: &str, election: &Election) -> tokio::task::JoinHandle<()> {
        let log = self.clone();
        let name = name.to_owned();
        let mut view = election.watch();
        tokio::spawn(async move {
            let mut leading = false;
            loop {
                // A campaign that ended (the server was killed) leads no more.
                let now_leads = view.borrow_and_update().is_leader && view.has_changed().is_ok();
                let now = Instant::now();
                if now_leads && !leading {
                    log.0.lock().unwrap().push((name.clone(), now, None));
                } else if !now_leads && leading {
                    let mut entries = log.0.lock().unwrap();
                    if let Some(open) = entries
                        .iter_mut()
                        .rev()
                        .find(|(who, _, until)| *who == name && until.is_none())
                    {
                        open.2 = Some(now);
                    }
                }
                leading = now_leads;
                if view.changed().await.is_err() && !leading {
                    return;
                }
            }
        })
    }

    /// Panics when two servers' leaderships overlapped.
    fn assert_no_two_leaders(&self) {
        let entries = self.0.lock().unwrap().clone();
        let far = Instant::now() + Duration::from_secs(3600);
        for (index, (first, from, until)) in entries.iter().enumerate() {
            for (second, other_from, other_until) in &entries[index + 1..] {
                if first == second {
                    continue;
                }
                let overlap =
                    *from < other_until.unwrap_or(far) && *other_from < until.unwrap_or(far);
                assert!(
                    !overlap,
                    "{first} and {second} led at once: {:?}",
                    entries
                        .iter()
                        .map(|(who, from, until)| (who.clone(), *from, *until))
                        .collect::<Vec<_>>()
                );
            }
        }
    }

    fn terms_of(&self, name: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(who, _, _)| who == name)
            .count()
    }
}

/// One server agent's etcd side: its links to every member, its store and its campaign.
struct Server {
    name: String,
    links: Vec<LinkProxy>,
    kv: Arc<EtcdKv>,
    store: StateStore,
    election: Election,
    _follower: Follower,
    _log_task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(cluster: &common::EtcdCluster, name: &str, log: &LeadershipLog) -> Self {
        let mut links = Vec::new();
        for member in cluster.endpoints() {
            links.push(LinkProxy::start(&member).await);
        }
        let config = EtcdConfig {
            request_timeout: Duration::from_secs(2),
            ..EtcdConfig::new(
                links.iter().map(LinkProxy::endpoint).collect(),
                "drover-sessions/",
            )
        };
        let kv = Arc::new(EtcdKv::connect(&config).await.unwrap());
        let store = StateStore::open_with_kv(kv.clone(), EngineOptions::default())
            .await
            .unwrap();
        let follower = follow(&kv, store.clone());
        let election = kv
            .campaign(Candidate {
                ttl: TTL,
                ..Candidate::new(name, name.as_bytes().to_vec())
            })
            .await
            .unwrap();
        let log_task = log.watch(name, &election);
        Self {
            name: name.to_owned(),
            links,
            kv,
            store,
            election,
            _follower: follower,
            _log_task: log_task,
        }
    }

    fn view(&self) -> Leadership {
        self.election.watch().borrow().clone()
    }

    /// Cuts (or heals) this server's links to every member.
    fn link(&self, mode: LinkMode) {
        for link in &self.links {
            link.set(mode);
        }
    }

    /// A write through this server's store, retried while its tables catch up with the
    /// previous leader's writes (a store that lost the race reloads and is refused once).
    async fn write(&self, id: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.store.upsert_node(node(id), NOW).await {
                Ok(_) => return,
                Err(error) => assert!(
                    Instant::now() < deadline,
                    "{} could not write {id} as leader: {error}",
                    self.name
                ),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The one server that leads, waiting up to `limit` for one.
async fn the_leader<'a>(servers: &'a [Server], limit: Duration, what: &str) -> &'a Server {
    let mut found = None;
    wait_for(what, limit, || {
        let leading: Vec<&Server> = servers
            .iter()
            .filter(|server| server.view().is_leader)
            .collect();
        assert!(leading.len() <= 1, "{} servers lead at once", leading.len());
        found = leading.first().copied();
        found.is_some()
    })
    .await;
    found.unwrap()
}

async fn alive(server: &Server, name: &str) -> bool {
    server
        .kv
        .members()
        .await
        .is_ok_and(|members| members.iter().any(|m| m.name == name && m.alive))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_cut_from_etcd_longer_than_its_session_opens_a_new_one_and_leads_again_later() {
    if !common::etcd_available() {
        return;
    }
    let cluster = common::EtcdCluster::start(3).await;
    let log = LeadershipLog::default();
    let a = Server::start(&cluster, "server-a", &log).await;
    the_leader(std::slice::from_ref(&a), Duration::from_secs(20), "a leads").await;
    a.write("a-before").await;
    let b = Server::start(&cluster, "server-b", &log).await;
    wait_for("b knows a leads", Duration::from_secs(10), || {
        b.view().leader.as_deref() == Some(&b"server-a"[..])
    })
    .await;

    // Cut off for more than twice the TTL: a steps down before its lease can lapse, b takes
    // over once it has, and a cannot write meanwhile.
    a.link(LinkMode::Cut);
    wait_for("b takes over", TTL * 4, || b.view().is_leader).await;
    assert!(!a.view().is_leader, "a still leads with its link cut");
    let refused = a.store.upsert_node(node("a-cut"), NOW).await.unwrap_err();
    assert!(refused.is_unavailable(), "{refused}");
    b.write("b-while-a-cut").await;
    tokio::time::sleep(TTL).await;

    // The link is back. etcd no longer knows a's lease: a opens a new session (its member
    // record is alive again) and follows; it still cannot write.
    a.link(LinkMode::Pass);
    let mut back = false;
    let deadline = Instant::now() + TTL * 4;
    while !back && Instant::now() < deadline {
        back = alive(&b, "server-a").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        back,
        "server-a never got a session again after its link was back"
    );
    wait_for("a knows b leads", Duration::from_secs(10), || {
        a.view().leader.as_deref() == Some(&b"server-b"[..])
    })
    .await;
    let refused = a
        .store
        .upsert_node(node("a-follows"), NOW)
        .await
        .unwrap_err();
    assert!(refused.is_unavailable(), "{refused}");

    // b goes (as a killed agent): a leads again, in a new term, and writes.
    b.election.abort();
    wait_for("a leads again", TTL * 4, || a.view().is_leader).await;
    assert_eq!(a.view().term, 2);
    a.write("a-again").await;
    assert!(a.store.node("b-while-a-cut").is_some());
    assert!(a.store.node("a-cut").is_none());
    log.assert_no_two_leaders();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_server_cut_from_etcd_once_in_turn_still_leaves_the_cluster_with_a_leader() {
    if !common::etcd_available() {
        return;
    }
    let cluster = common::EtcdCluster::start(3).await;
    let log = LeadershipLog::default();
    let mut servers = Vec::new();
    for name in ["server-0", "server-1", "server-2"] {
        servers.push(Server::start(&cluster, name, &log).await);
        // The first one leads before the others join.
        the_leader(&servers, Duration::from_secs(20), "a first leader").await;
    }
    for (turn, server) in servers.iter().enumerate() {
        server.link(LinkMode::Cut);
        tokio::time::sleep(TTL * 2 + Duration::from_secs(1)).await;
        let others: Vec<&Server> = servers.iter().filter(|s| s.name != server.name).collect();
        assert!(
            !server.view().is_leader,
            "{} leads with its link cut",
            server.name
        );
        assert!(
            others.iter().any(|other| other.view().is_leader),
            "nobody leads while {} is cut (turn {turn})",
            server.name
        );
        server.link(LinkMode::Pass);
        let mut back = false;
        let deadline = Instant::now() + TTL * 4;
        while !back && Instant::now() < deadline {
            back = alive(others[0], &server.name).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            back,
            "{} never got a session again after its link was back",
            server.name
        );
    }
    // Every server has lost its session once; the cluster still has a leader, which writes.
    let leader = the_leader(&servers, TTL * 4, "a leader after every cut").await;
    leader.write("after-every-cut").await;
    // And the one leading now can go too: another takes over.
    leader.election.abort();
    let gone = leader.name.clone();
    let rest: Vec<Server> = servers.into_iter().filter(|s| s.name != gone).collect();
    let next = the_leader(&rest, TTL * 4, "a leader after the last one went").await;
    next.write("after-the-last-leader-went").await;
    log.assert_no_two_leaders();
    assert!(
        log.terms_of(&next.name) >= 1 && log.0.lock().unwrap().len() >= 3,
        "the leadership moved fewer times than servers were cut"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_session_lease_was_revoked_opens_a_new_session_and_leads_again() {
    if !common::etcd_available() {
        return;
    }
    let cluster = common::EtcdCluster::start(3).await;
    let log = LeadershipLog::default();
    let a = Server::start(&cluster, "server-a", &log).await;
    the_leader(std::slice::from_ref(&a), Duration::from_secs(20), "a leads").await;
    a.write("a-before").await;

    // An operator revokes every lease (`etcdctl lease revoke`): `P leader` goes with a's.
    let mut operator = etcd_client::Client::connect(cluster.endpoints(), None)
        .await
        .unwrap();
    let leases = operator.leases().await.unwrap();
    assert!(!leases.leases().is_empty());
    for lease in leases.leases() {
        operator.lease_revoke(lease.id()).await.unwrap();
    }
    wait_for("a leads in a new term", TTL * 4, || a.view().term == 2).await;
    assert!(a.view().is_leader);
    a.write("a-after-revoke").await;
    let now = operator.leases().await.unwrap();
    assert!(
        now.leases()
            .iter()
            .all(|lease| leases.leases().iter().all(|old| old.id() != lease.id())),
        "a leads under a revoked lease"
    );
    log.assert_no_two_leaders();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_keep_alive_streams_broke_or_whose_members_went_keeps_its_session() {
    if !common::etcd_available() {
        return;
    }
    let cluster = common::EtcdCluster::start(3).await;
    let log = LeadershipLog::default();
    let a = Server::start(&cluster, "server-a", &log).await;
    the_leader(std::slice::from_ref(&a), Duration::from_secs(20), "a leads").await;

    // Every link drops for a moment, well within the session: every keep-alive stream and the
    // leader watch break; new ones carry the same session on.
    a.link(LinkMode::Cut);
    tokio::time::sleep(Duration::from_millis(800)).await;
    a.link(LinkMode::Pass);
    tokio::time::sleep(TTL * 2).await;
    let view = a.view();
    assert!(view.is_leader && view.term == 1, "{view:?}");
    a.write("after-streams-broke").await;

    // Its links to two members go, one after the other, each for longer than the session:
    // the keep-alives through the member left carry it.
    for member in 0..2 {
        a.links[member].set(LinkMode::Cut);
        a.links[(member + 1) % 3].set(LinkMode::Cut);
        tokio::time::sleep(TTL * 2).await;
        let view = a.view();
        assert!(
            view.is_leader && view.term == 1,
            "member {member}: {view:?}"
        );
        a.write(&format!("through-one-member-{member}")).await;
        a.link(LinkMode::Pass);
    }
    assert_eq!(log.terms_of("server-a"), 1);
}
