//! The checks hook of an allocation (Nomad's `checks_hook`, with its `check_restart` watcher):
//! one observer per check of the group's and the tasks' services, whatever their provider
//! (this agent has no Consul, so `consul` services' checks are run here too).
//!
//! An observer waits until its task runs (a group service's check: until any task of the
//! allocation runs), then probes every `interval` (the first after half of it, as Nomad), feeds
//! each outcome through its [`StatusTracker`] and publishes the result. When the task stops
//! running the observer goes back to waiting and starts over when it runs again, so a check
//! keeps running after a restart and can restart the task again. With `check_restart`, `limit`
//! consecutive unhealthy results past `grace` restart the task (a group service's check: every
//! running task) through the task runner with a "Restart Signaled" event naming the check; the
//! restart counts against the restart policy.
//!
//! Results are persisted (durably) in the client state when a check's status changes; a
//! restored allocation starts from them, and they stay until each check's first new result, so
//! an agent restart never reports a false failure.
//!
//! Not here: probing (see `probe`) or the counters (see `status`).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use drover_structs::service_registration::resolve_service_address;
use drover_structs::{
    Allocation, CheckQueryResult, CheckRestart, Node, Service, ServiceCheck, TASK_RESTART_SIGNAL,
    TaskEvent, check_id, check_mode,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::probe::{self, HttpProbe, HttpRules, ProbeResult};
use super::status::{RestartWatch, StatusTracker, initial_status, known_status};
use crate::clock::SharedClock;
use crate::config::ClientConfig;
use crate::state_db::StateDb;
use crate::taskenv::TaskEnv;
use crate::taskrunner::{TaskExecContext, TaskPhase, lock};

/// Timeout of a check that names none (Nomad requires one; this guards a JSON job without).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// Interval of a check that names none.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);
/// Output of a check that has not run yet (Nomad's words).
const WAITING_OUTPUT: &str = "nomad: waiting to run";

/// What the checks hook needs of one task: never the runner itself.
pub trait CheckedTask: Send + Sync + 'static {
    fn name(&self) -> &str;
    /// Follows the task's lifecycle phase.
    fn subscribe_phase(&self) -> watch::Receiver<TaskPhase>;
    /// The task's exec context (environment, cgroup, namespaces, user) while it runs.
    fn exec_context(&self) -> Option<TaskExecContext>;
    /// Restarts the running task with `event`, counting against its restart policy.
    fn restart_unhealthy(&self, event: TaskEvent) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

impl CheckedTask for crate::taskrunner::TaskRunner {
    fn name(&self) -> &str {
        crate::taskrunner::TaskRunner::name(self)
    }

    fn subscribe_phase(&self) -> watch::Receiver<TaskPhase> {
        crate::taskrunner::TaskRunner::subscribe_phase(self)
    }

    fn exec_context(&self) -> Option<TaskExecContext> {
        crate::taskrunner::TaskRunner::exec_context(self).ok()
    }

    fn restart_unhealthy(&self, event: TaskEvent) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            if let Err(error) = self.restart(event, true).await {
                tracing::debug!(task = self.name(), %error, "check restart found the task not running");
            }
        })
    }
}

/// What every checks hook of a client shares.
#[derive(Debug, Clone)]
pub struct ChecksDeps {
    pub config: Arc<ClientConfig>,
    pub clock: SharedClock,
    pub state_db: Arc<StateDb>,
    pub node: Arc<Node>,
}

/// The agent-wide HTTP clients of checks, so connections are pooled across them: one that
/// verifies certificates against the system's roots, one for `tls_skip_verify` checks.
fn http_client(skip_verify: bool) -> &'static reqwest::Client {
    static VERIFYING: OnceLock<reqwest::Client> = OnceLock::new();
    static SKIPPING: OnceLock<reqwest::Client> = OnceLock::new();
    let cell = if skip_verify { &SKIPPING } else { &VERIFYING };
    cell.get_or_init(|| {
        check_client_builder(skip_verify)
            .build()
            .unwrap_or_else(|error| {
                tracing::warn!(%error, "building the checks' HTTP client failed; using defaults");
                reqwest::Client::new()
            })
    })
}

fn check_client_builder(skip_verify: bool) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .user_agent("Nomad/drover checks")
        .pool_idle_timeout(Duration::from_secs(90))
        .tls_danger_accept_invalid_certs(skip_verify)
}

type Results = Arc<Mutex<BTreeMap<String, CheckQueryResult>>>;

/// The request of an `http` check and the client to send it with when the shared ones do not
/// fit, or why it cannot be sent.
type PreparedHttp = Result<(HttpProbe, Option<reqwest::Client>), String>;

/// The checks of one allocation. Dropping it does not stop them: call [`ChecksHook::stop`].
#[derive(Debug)]
pub struct ChecksHook {
    alloc_id: String,
    results: Results,
    stop: Mutex<CancellationToken>,
    deps: ChecksDeps,
}

/// One check to observe, with where it belongs.
#[derive(Debug, Clone)]
struct CheckSpec {
    id: String,
    service: Service,
    check: ServiceCheck,
    /// The service's task; empty for a group service.
    task: String,
    check_restart: Option<CheckRestart>,
}

fn checks_of(alloc: &Allocation) -> Vec<CheckSpec> {
    let Some(group) = alloc
        .job
        .as_deref()
        .and_then(|job| job.lookup_task_group(&alloc.task_group))
    else {
        return Vec::new();
    };
    // Each Connect sidecar's registration, with its default TCP check.
    let sidecars: Vec<Service> = group
        .services
        .iter()
        .filter_map(drover_structs::connect::sidecar_checked_service)
        .collect();
    let group_services = group
        .services
        .iter()
        .chain(&sidecars)
        .map(|service| (String::new(), service));
    let task_services = group.tasks.iter().flat_map(|task| {
        task.services
            .iter()
            .map(move |service| (task.name.clone(), service))
    });
    group_services
        .chain(task_services)
        .filter(|(_, service)| matches!(service.provider.as_str(), "" | "nomad" | "consul"))
        .flat_map(|(task, service)| {
            service.checks.iter().map(move |check| {
                let check_restart = match (&check.check_restart, &service.check_restart) {
                    (Some(own), Some(wide)) => Some(own.merged_over(wide)),
                    (own, wide) => own.clone().or_else(|| wide.clone()),
                };
                CheckSpec {
                    id: check_id(&alloc.id, &alloc.task_group, check),
                    service: service.clone(),
                    check: check.clone(),
                    task: task.clone(),
                    check_restart,
                }
            })
        })
        .collect()
}

/// One check that deployments look at: its ID and its `on_update`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedCheck {
    pub id: String,
    pub on_update: String,
}

/// The checks of `alloc` a deployment looks at (every check the hook runs), each with its
/// `on_update` (the service's when the check names none; Nomad's default `require_healthy`).
pub fn watched_checks(alloc: &Allocation) -> Vec<WatchedCheck> {
    checks_of(alloc)
        .into_iter()
        .map(|spec| {
            let on_update = [&spec.check.on_update, &spec.service.on_update]
                .into_iter()
                .find(|on_update| !on_update.is_empty())
                .cloned()
                .unwrap_or_else(|| "require_healthy".to_string());
            WatchedCheck {
                id: spec.id,
                on_update,
            }
        })
        .collect()
}

impl ChecksHook {
    /// Starts observing the checks of `alloc`, whose tasks are `tasks`; `None` when it has no
    /// checks (nothing is read or spawned then). Results persisted for the allocation (an agent
    /// restart) are where each check starts.
    pub fn start(
        deps: ChecksDeps,
        alloc: &Arc<Allocation>,
        tasks: &[Arc<dyn CheckedTask>],
    ) -> Option<ChecksHook> {
        if checks_of(alloc).is_empty() {
            return None;
        }
        let restored: BTreeMap<String, CheckQueryResult> = deps
            .state_db
            .get_check_results(&alloc.id)
            .unwrap_or_else(|error| {
                tracing::warn!(alloc_id = %alloc.id, %error, "reading persisted check results failed");
                None
            })
            .unwrap_or_default();
        let hook = ChecksHook {
            alloc_id: alloc.id.clone(),
            results: Arc::new(Mutex::new(BTreeMap::new())),
            stop: Mutex::new(CancellationToken::new()),
            deps,
        };
        hook.observe(alloc, tasks, restored);
        Some(hook)
    }

    /// The latest result of every check, by check ID.
    pub fn results(&self) -> BTreeMap<String, CheckQueryResult> {
        lock(&self.results).clone()
    }

    /// `read` applied to the latest results in place, without copying them (the lock is held
    /// meanwhile, so `read` must be quick and must not call back into the hook).
    pub fn with_results<R>(
        &self,
        read: impl FnOnce(&BTreeMap<String, CheckQueryResult>) -> R,
    ) -> R {
        read(&lock(&self.results))
    }

    /// Stops every observer (the allocation is stopping, or the agent shuts down). Results stay.
    pub fn stop(&self) {
        lock(&self.stop).cancel();
    }

    /// A new version of the allocation: checks that are gone stop, new ones start, unchanged
    /// ones start over from their latest result.
    pub fn update(&self, alloc: &Arc<Allocation>, tasks: &[Arc<dyn CheckedTask>]) {
        let previous = self.results();
        {
            let mut stop = lock(&self.stop);
            if stop.is_cancelled() {
                // Stopped for good (the allocation is stopping): nothing starts again.
                return;
            }
            stop.cancel();
            *stop = CancellationToken::new();
        }
        self.observe(alloc, tasks, previous);
    }

    fn observe(
        &self,
        alloc: &Arc<Allocation>,
        tasks: &[Arc<dyn CheckedTask>],
        previous: BTreeMap<String, CheckQueryResult>,
    ) {
        let specs = checks_of(alloc);
        let mut results = BTreeMap::new();
        let stop = lock(&self.stop).clone();
        for spec in specs {
            let now_secs = self.deps.clock.now_unix_nanos() / 1_000_000_000;
            let start = previous
                .get(&spec.id)
                .cloned()
                .unwrap_or_else(|| CheckQueryResult {
                    id: spec.id.clone(),
                    mode: check_mode(&spec.check).to_string(),
                    status: initial_status(&spec.check.initial_status).to_string(),
                    status_code: 0,
                    output: WAITING_OUTPUT.to_string(),
                    timestamp: now_secs,
                    group: alloc.name.clone(),
                    task: spec.task.clone(),
                    service: spec.service.name.clone(),
                    check: spec.check.name.clone(),
                });
            let targets: Vec<Arc<dyn CheckedTask>> = if spec.task.is_empty() {
                tasks.to_vec()
            } else {
                tasks
                    .iter()
                    .filter(|task| task.name() == spec.task)
                    .cloned()
                    .collect()
            };
            // A group service's script check runs in the task it names.
            let exec_task = {
                let wanted = if spec.task.is_empty() {
                    &spec.check.task_name
                } else {
                    &spec.task
                };
                tasks.iter().find(|task| task.name() == wanted).cloned()
            };
            let tracker = StatusTracker::new(
                known_status(&start.status),
                spec.check.success_before_passing,
                spec.check.failures_before_warning,
                spec.check.failures_before_critical,
            );
            results.insert(spec.id.clone(), start);
            let observer = Observer {
                spec,
                alloc: Arc::clone(alloc),
                targets,
                exec_task,
                tracker,
                results: Arc::clone(&self.results),
                deps: self.deps.clone(),
                stop: stop.clone(),
            };
            tokio::spawn(observer.run());
        }
        *lock(&self.results) = results;
        self.persist();
    }

    fn persist(&self) {
        persist(&self.deps.state_db, &self.alloc_id, &self.results);
    }
}

fn persist(state_db: &StateDb, alloc_id: &str, results: &Results) {
    let snapshot = lock(results).clone();
    if let Err(error) = state_db.put_check_results(alloc_id, &snapshot) {
        tracing::warn!(alloc_id, %error, "persisting check results failed");
    }
}

struct Observer {
    spec: CheckSpec,
    alloc: Arc<Allocation>,
    /// The tasks whose running arms the check and which a `check_restart` restarts.
    targets: Vec<Arc<dyn CheckedTask>>,
    /// The task a script check runs in.
    exec_task: Option<Arc<dyn CheckedTask>>,
    tracker: StatusTracker,
    results: Results,
    deps: ChecksDeps,
    stop: CancellationToken,
}

impl Observer {
    fn interval(&self) -> Duration {
        Some(self.spec.check.interval.to_std())
            .filter(|interval| !interval.is_zero())
            .unwrap_or(DEFAULT_INTERVAL)
    }

    fn timeout(&self) -> Duration {
        Some(self.spec.check.timeout.to_std())
            .filter(|timeout| !timeout.is_zero())
            .unwrap_or(DEFAULT_TIMEOUT)
    }

    async fn run(mut self) {
        if self.targets.is_empty() {
            return;
        }
        let mut phases: Vec<_> = self
            .targets
            .iter()
            .map(|task| task.subscribe_phase())
            .collect();
        let mut rearmed = false;
        loop {
            // Wait until a target runs.
            loop {
                if phases
                    .iter()
                    .any(|phase| *phase.borrow() == TaskPhase::Running)
                {
                    break;
                }
                tokio::select! {
                    () = self.stop.cancelled() => return,
                    changed = any_changed(&mut phases) => if !changed { return },
                }
            }
            if rearmed {
                // Armed again after the task stopped running: the check starts over, as a
                // re-registered check does.
                self.tracker = StatusTracker::new(
                    initial_status(&self.spec.check.initial_status),
                    self.spec.check.success_before_passing,
                    self.spec.check.failures_before_warning,
                    self.spec.check.failures_before_critical,
                );
            }
            rearmed = true;
            let started = tokio::time::Instant::now();
            let mut restart_watch = RestartWatch::new(self.spec.check_restart.as_ref(), started);
            let mut wait = self.interval() / 2;
            // Built at the first probe of this arming whose task environment is known.
            let mut prepared: Option<PreparedHttp> = None;
            loop {
                tokio::select! {
                    () = self.stop.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                    changed = any_changed(&mut phases) => {
                        if !changed { return }
                        if !phases.iter().any(|phase| *phase.borrow() == TaskPhase::Running) {
                            break;
                        }
                        continue;
                    }
                }
                wait = self.interval();
                let result = tokio::select! {
                    () = self.stop.cancelled() => return,
                    result = self.probe(&mut prepared) => result,
                };
                let status = self.tracker.observe(result.outcome);
                self.publish(status, result);
                let restart = restart_watch
                    .as_mut()
                    .is_some_and(|watch| watch.observe(status, tokio::time::Instant::now()));
                if restart {
                    self.restart_targets().await;
                    break;
                }
            }
            // Wait until the targets are no longer running before arming again (a restart in
            // progress still shows the task running for a moment).
            loop {
                if !phases
                    .iter()
                    .any(|phase| *phase.borrow() == TaskPhase::Running)
                {
                    break;
                }
                tokio::select! {
                    () = self.stop.cancelled() => return,
                    changed = any_changed(&mut phases) => if !changed { return },
                }
            }
        }
    }

    async fn restart_targets(&self) {
        let reason = format!("healthcheck: check {:?} unhealthy", self.spec.check.name);
        tracing::info!(alloc_id = %self.alloc.id, check = %self.spec.check.name, "restarting after an unhealthy check");
        for task in &self.targets {
            if *task.subscribe_phase().borrow() != TaskPhase::Running {
                continue;
            }
            let event = TaskEvent::new(TASK_RESTART_SIGNAL, self.deps.clock.now_unix_nanos())
                .with_restart_reason(&reason);
            task.restart_unhealthy(event).await;
        }
    }

    fn publish(&self, status: &'static str, result: ProbeResult) {
        let changed = {
            let mut results = lock(&self.results);
            let Some(entry) = results.get_mut(&self.spec.id) else {
                return;
            };
            let changed = entry.status != status;
            if changed {
                entry.status = status.to_string();
            }
            entry.status_code = result.status_code;
            if entry.output != result.output {
                entry.output = result.output;
            }
            entry.timestamp = self.deps.clock.now_unix_nanos() / 1_000_000_000;
            changed
        };
        if changed {
            persist(&self.deps.state_db, &self.alloc.id, &self.results);
        }
    }

    /// The environment `${…}` in the check is interpolated with: its task's, or for a group
    /// service the first running task's (they share every `NOMAD_ALLOC_*` variable).
    fn env(&self) -> TaskEnv {
        self.task_env().0
    }

    /// [`Observer::env`], and whether a running task's environment was found for it.
    fn task_env(&self) -> (TaskEnv, bool) {
        let context = self
            .exec_task
            .iter()
            .chain(self.targets.iter())
            .find_map(|task| task.exec_context());
        let known = context.is_some();
        let env = TaskEnv {
            env: context.map(|context| context.env).unwrap_or_default(),
            node_values: crate::taskenv::node_values(&self.deps.node, &self.alloc_region()),
        };
        (env, known)
    }

    fn alloc_region(&self) -> String {
        self.alloc
            .job
            .as_deref()
            .map(|job| job.region.clone())
            .unwrap_or_default()
    }

    /// Runs the check once. An `http` check's request is the same for every probe while its
    /// task runs (its environment and ports do not change), so it is built once per arming, as
    /// soon as the task's environment is known, and kept in `prepared`.
    async fn probe(&self, prepared: &mut Option<PreparedHttp>) -> ProbeResult {
        let check = &self.spec.check;
        let timeout = self.timeout();
        match check.r#type.as_str() {
            "http" => {
                let built;
                let request = match prepared {
                    Some(request) => &*request,
                    None => {
                        let (env, known) = self.task_env();
                        let request = self.http_probe(&env);
                        if known {
                            &*prepared.insert(request)
                        } else {
                            built = request;
                            &built
                        }
                    }
                };
                match request {
                    Ok((probe, client)) => {
                        let client = client
                            .as_ref()
                            .unwrap_or_else(|| http_client(self.spec.check.tls_skip_verify));
                        probe::http(client, probe, timeout, self.http_rules()).await
                    }
                    Err(message) => failure(message.clone()),
                }
            }
            "tcp" => match self.address() {
                Ok(address) => probe::tcp(&address, timeout).await,
                Err(message) => failure(message),
            },
            "grpc" => match self.address() {
                Ok(address) => {
                    let env = self.env();
                    let tls = check.grpc_use_tls.then(|| super::grpc::GrpcTls {
                        skip_verify: check.tls_skip_verify,
                        server_name: env.interpolate(&check.tls_server_name),
                    });
                    super::grpc::grpc(
                        &address,
                        &env.interpolate(&check.grpc_service),
                        tls,
                        timeout,
                    )
                    .await
                }
                Err(message) => failure(message),
            },
            "script" => {
                let Some(context) = self.exec_task.as_ref().and_then(|task| task.exec_context())
                else {
                    return failure("nomad: the check's task is not running".to_string());
                };
                let env = TaskEnv {
                    env: context.env.clone(),
                    node_values: BTreeMap::new(),
                };
                let mut command = vec![env.interpolate(&check.command)];
                command.extend(check.args.iter().map(|arg| env.interpolate(arg)));
                let shim = match drover_driver::locate_shim_binary(
                    self.deps.config.shim_binary.as_deref(),
                ) {
                    Ok(shim) => shim,
                    Err(error) => return failure(format!("nomad: {error}")),
                };
                probe::script(shim, context, command, timeout).await
            }
            other => failure(format!("nomad: {other:?} checks are not run by drover")),
        }
    }

    /// `host:port` the check connects to: its own `port` and `address_mode` over the
    /// service's (Nomad: a check without `address_mode` uses the host's address, or the
    /// service's custom address when it has one).
    fn address(&self) -> Result<String, String> {
        let check = &self.spec.check;
        let service = &self.spec.service;
        let port_label = if check.port_label.is_empty() {
            &service.port_label
        } else {
            &check.port_label
        };
        let mode = match (check.address_mode.as_str(), service.address.is_empty()) {
            ("", true) => "host",
            ("", false) => "auto",
            (mode, _) => mode,
        };
        let task = (!self.spec.task.is_empty()).then_some(self.spec.task.as_str());
        let resolved =
            resolve_service_address(&self.alloc, task, port_label, mode, &service.address, None)
                .map_err(|error| format!("nomad: {error}"))?;
        let host = if resolved.address.is_empty() {
            self.deps
                .node
                .attributes
                .get("unique.network.ip-address")
                .cloned()
                .unwrap_or_else(|| "127.0.0.1".to_string())
        } else {
            resolved.address
        };
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host
        };
        Ok(format!("{host}:{}", resolved.port))
    }

    /// How an HTTP answer maps to a result: Nomad's rules for a `nomad` service, Consul's for
    /// a `consul` one (drover runs those checks itself, as Consul's agent would).
    fn http_rules(&self) -> HttpRules {
        if self.spec.service.provider == "consul" {
            HttpRules::Consul
        } else {
            HttpRules::Nomad
        }
    }

    /// The request of an `http` check, and the client to send it with when the shared ones do
    /// not fit: a check with `tls_server_name` gets its own, which resolves that name to the
    /// check's address so the TLS handshake sends and verifies it.
    fn http_probe(&self, env: &TaskEnv) -> PreparedHttp {
        let check = &self.spec.check;
        let protocol = if check.protocol.is_empty() {
            "http"
        } else {
            check.protocol.as_str()
        };
        if protocol != "http" && protocol != "https" {
            return Err(format!("nomad: protocol {protocol:?} is not supported"));
        }
        let path = env.interpolate(&check.path);
        let separator = if path.starts_with('/') { "" } else { "/" };
        let address = self.address()?;
        let server_name = env.interpolate(&check.tls_server_name);
        let (authority, client) = if protocol == "https" && !server_name.is_empty() {
            let socket: std::net::SocketAddr = address
                .parse()
                .map_err(|error| format!("nomad: check address {address:?}: {error}"))?;
            let client = check_client_builder(check.tls_skip_verify)
                .resolve(&server_name, socket)
                .build()
                .map_err(|error| format!("nomad: {error}"))?;
            (format!("{server_name}:{}", socket.port()), Some(client))
        } else {
            (address, None)
        };
        let url = format!("{protocol}://{authority}{separator}{path}");
        let headers: Vec<(String, String)> = check
            .header
            .iter()
            .flat_map(|(name, values)| {
                values
                    .iter()
                    .map(move |value| (name.clone(), env.interpolate(value)))
            })
            .collect();
        let probe = HttpProbe::new(&url, &check.method, &headers, &check.body)?;
        Ok((probe, client))
    }
}

fn failure(output: String) -> ProbeResult {
    ProbeResult {
        outcome: super::status::Outcome::Failure,
        status_code: 0,
        output,
    }
}

/// Waits until any of `phases` changes; false when every sender is gone (the runners ended).
async fn any_changed(phases: &mut [watch::Receiver<TaskPhase>]) -> bool {
    let waits = phases.iter_mut().map(|phase| Box::pin(phase.changed()));
    matches!(futures_select_all(waits).await, Some(Ok(())))
}

/// The first of several futures to finish; `None` when there are none.
async fn futures_select_all<F: Future + Unpin>(
    futures: impl Iterator<Item = F>,
) -> Option<F::Output> {
    let mut futures: Vec<F> = futures.collect();
    if futures.is_empty() {
        return None;
    }
    Some(
        std::future::poll_fn(|context| {
            for future in &mut futures {
                if let std::task::Poll::Ready(output) = Pin::new(future).poll(context) {
                    return std::task::Poll::Ready(output);
                }
            }
            std::task::Poll::Pending
        })
        .await,
    )
}
