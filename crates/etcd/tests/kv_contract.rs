//! The `Kv` contract (as `MemoryKv` and `EmbeddedKv` keep it) on a real 3-member etcd cluster:
//! ordered batches and revisions, conditional batches, reopening, large values, paged scans,
//! and the limits etcd puts on one transaction.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use drover_etcd::{EtcdConfig, EtcdKv};
use drover_state::{KeyRange, Kv, KvError, KvPair, WriteBatch};

async fn open(cluster: &common::EtcdCluster, prefix: &str) -> EtcdKv {
    EtcdKv::connect(&EtcdConfig::new(cluster.endpoints(), prefix))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_keeps_the_kv_contract() {
    if !common::etcd_available() {
        return;
    }
    let cluster = common::EtcdCluster::start(3).await;

    // Batches apply in order, a later op on a key wins, and each batch is one revision.
    let kv = open(&cluster, "contract/order/").await;
    assert_eq!(kv.revision().await.unwrap(), 0);
    let mut batch = WriteBatch::new();
    batch.put(b"a/1".to_vec(), b"one".to_vec());
    batch.put(b"a/2".to_vec(), b"two".to_vec());
    batch.put(b"b/1".to_vec(), b"other".to_vec());
    batch.delete(b"a/2".to_vec());
    batch.put(b"a/3".to_vec(), b"first".to_vec());
    batch.put(b"a/3".to_vec(), b"last".to_vec());
    assert_eq!(kv.apply(batch).await.unwrap(), 1);
    assert_eq!(
        kv.scan(KeyRange::prefix(b"a/")).await.unwrap(),
        vec![
            KvPair {
                key: b"a/1".to_vec(),
                value: b"one".to_vec()
            },
            KvPair {
                key: b"a/3".to_vec(),
                value: b"last".to_vec()
            }
        ]
    );
    assert_eq!(kv.get(b"b/1").await.unwrap(), Some(b"other".to_vec()));
    assert_eq!(kv.get(b"a/2").await.unwrap(), None);
    assert_eq!(kv.revision().await.unwrap(), 1);

    // A conditional batch on a stale revision is refused and changes nothing.
    let mut stale = WriteBatch::new();
    stale.put(b"a/9".to_vec(), b"nine".to_vec());
    stale.expected_revision = Some(0);
    assert!(matches!(
        kv.apply(stale).await,
        Err(KvError::RevisionMismatch {
            expected: 0,
            found: 1
        })
    ));
    assert_eq!(kv.get(b"a/9").await.unwrap(), None);
    assert_eq!(kv.revision().await.unwrap(), 1);
    let mut current = WriteBatch::new();
    current.delete(b"a/1".to_vec());
    current.expected_revision = Some(1);
    assert_eq!(kv.apply(current).await.unwrap(), 2);

    // Another handle on the same prefix (a restarted agent) sees everything, with its revision;
    // another prefix is another store.
    let reopened = open(&cluster, "contract/order/").await;
    assert_eq!(reopened.revision().await.unwrap(), 2);
    assert_eq!(reopened.get(b"a/3").await.unwrap(), Some(b"last".to_vec()));
    assert_eq!(reopened.get(b"a/1").await.unwrap(), None);
    let other = open(&cluster, "contract/other/").await;
    assert_eq!(other.revision().await.unwrap(), 0);
    assert!(other.scan(KeyRange::prefix(b"")).await.unwrap().is_empty());

    // Large values round trip (stored compressed); scans page through many keys and honour
    // both ends of a range.
    let kv = open(&cluster, "contract/scan/").await;
    let large = serde_json::to_vec(&vec!["an allocation's worth of JSON"; 40_000]).unwrap();
    assert!(large.len() > 1_000_000);
    let mut batch = WriteBatch::new();
    batch.put(b"big".to_vec(), large.clone());
    kv.apply(batch).await.unwrap();
    assert_eq!(kv.get(b"big").await.unwrap(), Some(large));
    for chunk in 0..25 {
        let mut batch = WriteBatch::new();
        for number in 0..100 {
            let key = format!("t/allocs/{:05}", chunk * 100 + number);
            batch.put(key.into_bytes(), vec![b'x'; 64]);
        }
        kv.apply(batch).await.unwrap();
    }
    let all = kv.scan(KeyRange::prefix(b"t/allocs/")).await.unwrap();
    assert_eq!(all.len(), 2500);
    assert!(all.windows(2).all(|pair| pair[0].key < pair[1].key));
    let some = kv
        .scan(KeyRange::between(b"t/allocs/01000", b"t/allocs/02200"))
        .await
        .unwrap();
    assert_eq!(some.len(), 1200);
    assert_eq!(some[0].key, b"t/allocs/01000".to_vec());
    let everything = kv
        .scan(KeyRange {
            start: Vec::new(),
            end: None,
        })
        .await
        .unwrap();
    assert_eq!(everything.len(), 2501);

    // etcd's limits on one transaction are clear errors, not partial writes.
    let mut too_many = WriteBatch::new();
    for number in 0..200 {
        too_many.put(format!("many/{number}").into_bytes(), b"v".to_vec());
    }
    let error = kv.apply(too_many).await.unwrap_err();
    assert!(error.to_string().contains("--max-txn-ops"), "{error}");
    let mut too_large = WriteBatch::new();
    // Incompressible: xorshift64 bytes.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let noise: Vec<u8> = (0..2_000_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 56) as u8
        })
        .collect();
    too_large.put(b"noise".to_vec(), noise);
    let error = kv.apply(too_large).await.unwrap_err();
    assert!(error.to_string().contains("--max-request-bytes"), "{error}");
    assert_eq!(kv.get(b"many/0").await.unwrap(), None);
    assert_eq!(kv.get(b"noise").await.unwrap(), None);
    assert!(kv.max_ops_per_batch().is_some_and(|cap| cap < 128));
}
