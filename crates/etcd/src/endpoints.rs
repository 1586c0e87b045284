//! One etcd connection per configured member, and calls that move on to the next member when
//! one does not answer.
//!
//! etcd-client balances one channel over every endpoint, so after a member dies a request may
//! still be routed to it (and fail, or wait out the request timeout) while live members sit
//! idle. Here each member has its own client; a call goes to the member that answered last
//! and, when that member fails with a transport error, "no leader", or does not answer within
//! the call's per-attempt timeout, to the next one, until every member was tried. The session
//! keep-alives of [`crate::election`] go to every member at once through [`Endpoints::client`].
//!
//! Not here: what is asked (the Kv, the election), TLS and credentials beyond handing them to
//! etcd-client.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};

use crate::tls::TlsMaterial;
use drover_state::KvError;

use crate::config::{EtcdConfig, client_error, is_unavailable};

/// Dials a member over plain `http://` with tonic's own connector, which sets `TCP_NODELAY`.
/// etcd-client's OpenSSL transport (its `tls-openssl` feature, which otherwise carries every
/// connection) dials without it, so each request waited out Nagle's algorithm and the
/// member's delayed ACK: about 40 ms a request, 1.4 s for a follower to reload a small store.
/// The `https://` members still go through that transport.
struct TonicDialer;

impl etcd_client::BalancedChannelBuilder for TonicDialer {
    type Error = tonic::transport::Error;

    fn balanced_channel(
        self,
        buffer_size: usize,
    ) -> Result<
        (
            etcd_client::Channel,
            tokio::sync::mpsc::Sender<
                tonic::transport::channel::Change<
                    tonic::transport::Uri,
                    tonic::transport::Endpoint,
                >,
            >,
        ),
        Self::Error,
    > {
        let (channel, endpoints) = tonic::transport::Channel::balance_channel(buffer_size);
        Ok((etcd_client::Channel::Tonic(channel), endpoints))
    }
}

/// The pause between two rounds over the members while all of them refuse.
const ROUND_PAUSE: Duration = Duration::from_millis(100);

/// The members' clients, made on first use (a client with credentials authenticates as it
/// connects, which a dead member cannot answer).
pub(crate) struct Endpoints {
    urls: Vec<String>,
    config: EtcdConfig,
    tls: Option<TlsMaterial>,
    clients: Vec<tokio::sync::Mutex<Option<Client>>>,
    /// The member that answered last: the first one asked next.
    preferred: AtomicUsize,
}

impl Endpoints {
    pub(crate) fn new(config: &EtcdConfig) -> Result<Self, KvError> {
        if config.endpoints.is_empty() {
            return Err(KvError::Backend {
                operation: "connect",
                reason: "no etcd endpoints configured".to_owned(),
            });
        }
        let tls = config.tls.as_ref().map(TlsMaterial::load).transpose()?;
        Ok(Self {
            urls: config.endpoints.clone(),
            config: config.clone(),
            tls,
            clients: config
                .endpoints
                .iter()
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            preferred: AtomicUsize::new(0),
        })
    }

    /// How many members are configured.
    pub(crate) fn count(&self) -> usize {
        self.urls.len()
    }

    /// The URL of member `index`.
    pub(crate) fn url(&self, index: usize) -> &str {
        &self.urls[index % self.urls.len()]
    }

    fn options(&self) -> ConnectOptions {
        let timeout = self.config.request_timeout;
        let mut options = ConnectOptions::new()
            .with_timeout(timeout)
            // A member that is down refuses at once; one that is unreachable must not hold a
            // call for the whole request timeout before the next member is tried.
            .with_connect_timeout(timeout.min(Duration::from_secs(1)))
            // Without a leader etcd cannot commit: answer at once rather than wait.
            .with_require_leader(true)
            // A connection to a member that vanished without closing it is found dead within
            // a few seconds, even while idle.
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2))
            .with_keep_alive_while_idle(true);
        if let Some(credentials) = &self.config.credentials {
            options = options
                .with_user(credentials.username.clone(), credentials.password.clone())
                .with_auto_token_refresh(true);
        }
        crate::tls::apply(&self.config, self.tls.as_ref(), options)
    }

    /// Member `index`'s client, connecting it on first use.
    pub(crate) async fn client(&self, index: usize) -> Result<Client, etcd_client::Error> {
        let index = index % self.clients.len();
        let mut slot = self.clients[index].lock().await;
        if let Some(client) = slot.as_ref() {
            return Ok(client.clone());
        }
        let url = self.urls[index].as_str();
        let client = if url.starts_with("http://") {
            Client::connect_with_balanced_channel([url], Some(self.options()), TonicDialer).await?
        } else {
            Client::connect([url], Some(self.options())).await?
        };
        *slot = Some(client.clone());
        Ok(client)
    }

    /// The member asked first now.
    pub(crate) fn preferred(&self) -> usize {
        self.preferred.load(Ordering::Relaxed) % self.urls.len()
    }

    /// Member `index` failed outside a call (a watch stream ended): ask the next one first.
    pub(crate) fn failed(&self, index: usize) {
        let next = (index + 1) % self.urls.len();
        let _ = self
            .preferred
            .compare_exchange(index, next, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Runs `request` on the preferred member, then on each other member in turn while they
    /// fail as unavailable or take longer than `attempt`; answers which member answered.
    /// While every member refuses at once (down, or without a leader while etcd elects one:
    /// nothing was applied), the round is repeated until `budget` has passed.
    pub(crate) async fn call_on<T, F, Fut>(
        &self,
        operation: &'static str,
        attempt: Duration,
        budget: Duration,
        mut request: F,
    ) -> Result<(usize, T), KvError>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let deadline = tokio::time::Instant::now() + budget;
        loop {
            let first = self.preferred();
            let mut last_error = None;
            let mut timed_out = false;
            for step in 0..self.urls.len() {
                let index = (first + step) % self.urls.len();
                let answer = tokio::time::timeout(attempt, async {
                    let client = self.client(index).await?;
                    request(client).await
                })
                .await;
                match answer {
                    Ok(Ok(value)) => {
                        self.preferred.store(index, Ordering::Relaxed);
                        return Ok((index, value));
                    }
                    Ok(Err(error)) if is_unavailable(&error) => {
                        tracing::debug!(member = %self.urls[index], %error, "etcd member failed; trying the next");
                        last_error = Some(client_error(operation, error));
                    }
                    Ok(Err(error)) => return Err(client_error(operation, error)),
                    Err(_) => {
                        tracing::debug!(member = %self.urls[index], "etcd member did not answer in time; trying the next");
                        timed_out = true;
                        last_error = Some(KvError::Unavailable {
                            reason: format!(
                                "etcd {operation}: {} did not answer within {attempt:?}",
                                self.urls[index]
                            ),
                        });
                    }
                }
            }
            let error = last_error.unwrap_or(KvError::Unavailable {
                reason: format!("etcd {operation}: no member answered"),
            });
            let now = tokio::time::Instant::now();
            if timed_out || now + ROUND_PAUSE >= deadline {
                return Err(error);
            }
            tokio::time::sleep(ROUND_PAUSE).await;
        }
    }

    /// The configured timeout of one request.
    pub(crate) fn request_timeout(&self) -> Duration {
        self.config.request_timeout
    }

    /// [`Self::call_on`], with the configured request timeout per attempt and in all.
    pub(crate) async fn call<T, F, Fut>(
        &self,
        operation: &'static str,
        request: F,
    ) -> Result<T, KvError>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let timeout = self.config.request_timeout;
        self.call_on(operation, timeout, timeout, request)
            .await
            .map(|(_, value)| value)
    }
}
