//! The etcd cluster under a drover cluster, as an operator looks at it: its members (etcd's
//! member list) and what each one says of itself (etcd's status: leader, version, raft term
//! and index, database size). The raft peers of drover's state are these members: drover's
//! servers keep no log of their own.
//!
//! Not here: drover's servers (`crate::election`'s member records).

use std::time::Duration;

use crate::{EtcdKv, KvError};

/// How long one member may take to say how it is.
const STATUS_TIMEOUT: Duration = Duration::from_secs(2);

/// One etcd member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdMember {
    /// etcd's member ID.
    pub id: u64,
    pub name: String,
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
    /// A learner replicates but does not vote.
    pub is_learner: bool,
    /// What it answered when asked, `None` when it did not answer (or drover is not
    /// configured with any of its client URLs).
    pub status: Option<EtcdMemberStatus>,
}

/// What a member says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdMemberStatus {
    /// Whether it is etcd's raft leader now.
    pub is_leader: bool,
    pub version: String,
    pub db_size: i64,
    pub raft_term: u64,
    pub raft_index: u64,
}

impl EtcdKv {
    /// The etcd cluster's members, each with its status when one of the configured endpoints
    /// reaches it.
    pub async fn etcd_members(&self) -> Result<Vec<EtcdMember>, KvError> {
        let list = self
            .endpoints()
            .call("member list", |mut client| async move {
                client.member_list().await
            })
            .await?;
        let mut statuses = Vec::new();
        for index in 0..self.endpoints().count() {
            let asked = tokio::time::timeout(STATUS_TIMEOUT, async {
                let mut client = self.endpoints().client(index).await?;
                client.status().await
            })
            .await;
            if let Ok(Ok(status)) = asked
                && let Some(header) = status.header()
            {
                statuses.push((header.member_id(), status));
            }
        }
        let mut members: Vec<EtcdMember> =
            list.members()
                .iter()
                .map(|member| EtcdMember {
                    id: member.id(),
                    name: member.name().to_owned(),
                    peer_urls: member.peer_urls().to_vec(),
                    client_urls: member.client_urls().to_vec(),
                    is_learner: member.is_learner(),
                    status: statuses.iter().find(|(id, _)| *id == member.id()).map(
                        |(id, status)| EtcdMemberStatus {
                            is_leader: status.leader() == *id,
                            version: status.version().to_owned(),
                            db_size: status.db_size(),
                            raft_term: status.raft_term(),
                            raft_index: status.raft_index(),
                        },
                    ),
                })
                .collect();
        members.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(members)
    }
}
