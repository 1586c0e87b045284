//! The group service hook: registers the task group's `service` blocks (owned by
//! `group-<group>`) while the allocation's tasks run, as Nomad's alloc-runner group service hook.
//!
//! - registered when a task of the allocation is running (on every task state change the alloc
//!   runner hands over; after an agent restart that is the first pass over the re-attached tasks:
//!   an upsert, nothing deleted first);
//! - registered again after any task of the allocation restarted (its `Restarting` count moved),
//!   whatever asked for the restart — a user, a check's `check_restart`, the restart policy.
//!   This is Nomad's `RunnerTaskRestartHook` fix: without it, registrations that a restart made
//!   stale (a check watcher's, for one) are never refreshed and a second restart never comes;
//!   [`GroupServiceHook::reregister`] forces the same from outside;
//! - deregistered before the group's `shutdown_delay` when the allocation is stopped (the alloc
//!   runner calls [`GroupServiceHook::deregister`] and only then waits the delay), when it is
//!   destroyed, and when every task is dead (completed, failed, killed);
//! - an allocation update (a canary promoted, tags changed) re-registers.
//!
//! Each group service with a Connect sidecar also registers its sidecar, as Nomad does in
//! Consul: `<service>-sidecar-proxy` at the host's address and the host port mapped to the
//! sidecar's public listener, for as long as the group's services are.
//!
//! **Not** here: the tasks' own services (the task service hook), checks.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use drover_structs::{Allocation, Node, TASK_STATE_RUNNING, TaskState, Timestamp};

use crate::allocdir::{AllocDir, TaskDir};
use crate::mutex::lock;
use crate::services::ServiceRegistrar;
use crate::services::sync::ServiceSync;
use crate::services::workload::{ServiceWorkload, group_owner};
use crate::taskenv::{TaskEnv, TaskEnvInputs, TaskPathView};

/// Per task: its restart count and last restart, as seen when the services were registered.
type RestartMarks = BTreeMap<String, (u64, Timestamp)>;

struct GroupState {
    alloc: Arc<Allocation>,
    /// Registrations are wanted.
    registered: bool,
    /// The restart marks when they were last registered.
    registered_marks: RestartMarks,
    /// The catalog may hold registrations an earlier agent sent (cleared once named in a
    /// deregistration, or covered by a registration).
    unaccounted: bool,
    /// The allocation is being stopped or destroyed: nothing is registered any more.
    stopping: bool,
}

/// See the module docs.
pub struct GroupServiceHook {
    sync: Arc<ServiceSync>,
    node: Arc<Node>,
    region: String,
    alloc_dir: AllocDir,
    state: Mutex<GroupState>,
}

impl std::fmt::Debug for GroupServiceHook {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("GroupServiceHook")
            .finish_non_exhaustive()
    }
}

/// The group's services, each Connect sidecar's own `<service>-sidecar-proxy` after them.
fn group_services(alloc: &Allocation) -> Vec<drover_structs::Service> {
    let services = alloc
        .job
        .as_deref()
        .and_then(|job| job.lookup_task_group(&alloc.task_group))
        .map_or(&[][..], |group| group.services.as_slice());
    let sidecars: Vec<drover_structs::Service> =
        services.iter().filter_map(sidecar_registration).collect();
    services.iter().cloned().chain(sidecars).collect()
}

/// The catalog entry of a service's Connect sidecar, as Nomad registers it: named
/// `<service>-sidecar-proxy`, at the host address and port mapped to the sidecar's public
/// listener, with the sidecar's tags (the service's when it names none).
fn sidecar_registration(service: &drover_structs::Service) -> Option<drover_structs::Service> {
    let sidecar = service.connect.as_ref()?.sidecar_service.as_ref()?;
    Some(drover_structs::Service {
        name: format!("{}-sidecar-proxy", service.name),
        port_label: if sidecar.port.is_empty() {
            drover_structs::connect::sidecar_port_label(&service.name)
        } else {
            sidecar.port.clone()
        },
        address_mode: "host".to_string(),
        tags: if sidecar.tags.is_empty() {
            service.tags.clone()
        } else {
            sidecar.tags.clone()
        },
        provider: service.provider.clone(),
        namespace: service.namespace.clone(),
        ..drover_structs::Service::default()
    })
}

impl GroupServiceHook {
    pub fn new(
        registrar: Arc<dyn ServiceRegistrar>,
        alloc: Arc<Allocation>,
        node: Arc<Node>,
        region: String,
        alloc_dir: AllocDir,
    ) -> Arc<Self> {
        Arc::new(GroupServiceHook {
            sync: ServiceSync::new(registrar, &alloc.id, &group_owner(&alloc.task_group)),
            node,
            region,
            alloc_dir,
            state: Mutex::new(GroupState {
                alloc,
                registered: false,
                registered_marks: RestartMarks::new(),
                unaccounted: true,
                stopping: false,
            }),
        })
    }

    /// Nothing registered, nothing to register.
    fn is_idle(&self, state: &GroupState) -> bool {
        group_services(&state.alloc).is_empty() && self.sync.is_idle()
    }

    /// The group's environment: the allocation's `NOMAD_*` variables (no task's), its ports,
    /// job and group meta, and the node's facts.
    fn group_env(&self, alloc: &Allocation) -> TaskEnv {
        let no_task = drover_structs::Task::default();
        let task_dir = TaskDir {
            dir: self.alloc_dir.root.clone(),
            local_dir: Default::default(),
            secrets_dir: Default::default(),
            tmp_dir: Default::default(),
            shared_alloc_dir: self.alloc_dir.shared_dir.clone(),
            logs_dir: self.alloc_dir.logs_dir.clone(),
        };
        let inputs = TaskEnvInputs {
            alloc,
            task: &no_task,
            node: &self.node,
            region: &self.region,
            task_dir: &task_dir,
            path_view: TaskPathView::Host,
        };
        let mut env = TaskEnv::build(&inputs, &BTreeMap::new());
        for task_only in ["NOMAD_TASK_NAME", "NOMAD_TASK_DIR", "NOMAD_SECRETS_DIR"] {
            env.env.remove(task_only);
        }
        env
    }

    /// Records the wish for the current state. Registrations that cannot be built are logged
    /// (a group service has no task to report it on) and the previous wish stays.
    fn want_current(&self, state: &mut GroupState) {
        let env = self.group_env(&state.alloc);
        let services = group_services(&state.alloc);
        let workload = ServiceWorkload {
            alloc: &state.alloc,
            node: &self.node,
            task: None,
            services: &services,
            env: &env,
            driver_network: None,
        };
        if state.registered {
            match workload.registrations() {
                Ok(registrations) => {
                    state.unaccounted = false;
                    self.sync.want(registrations, Vec::new());
                }
                Err(error) => {
                    tracing::warn!(alloc_id = %state.alloc.id, %error, "cannot register the group's services");
                }
            }
        } else {
            let maybe_held = if state.unaccounted {
                workload.registration_ids()
            } else {
                Vec::new()
            };
            state.unaccounted = false;
            self.sync.want(Vec::new(), maybe_held);
        }
    }

    fn sync_in_background(&self) {
        let sync = self.sync.clone();
        tokio::spawn(async move {
            if let Err(error) = sync.sync().await {
                tracing::warn!(%error, "group service registration not synced; retrying in the background");
            }
        });
    }

    /// Called by the alloc runner with every task's state after any of them changed.
    pub fn on_task_states(&self, states: &BTreeMap<String, TaskState>) {
        let mut state = lock(&self.state);
        if state.stopping || self.is_idle(&state) {
            return;
        }
        let any_running = states.values().any(|task| task.state == TASK_STATE_RUNNING);
        let all_dead = states.values().all(TaskState::is_dead);
        let marks: RestartMarks = states
            .iter()
            .map(|(name, task)| (name.clone(), (task.restarts, task.last_restart)))
            .collect();
        if any_running && (!state.registered || marks != state.registered_marks) {
            state.registered = true;
            state.registered_marks = marks;
            self.want_current(&mut state);
            self.sync_in_background();
        } else if all_dead && (state.registered || state.unaccounted) {
            state.registered = false;
            self.want_current(&mut state);
            self.sync_in_background();
        }
    }

    /// Registers the group's services again now, if they are registered (for a restart that
    /// did not go through a task's restart count).
    pub async fn reregister(&self) {
        {
            let mut state = lock(&self.state);
            if !state.registered || state.stopping || self.is_idle(&state) {
                return;
            }
            self.want_current(&mut state);
        }
        self.send().await;
    }

    /// A new version of the allocation: registered services are registered again with it.
    pub async fn update(&self, alloc: Arc<Allocation>) {
        {
            let mut state = lock(&self.state);
            state.alloc = alloc;
            if !state.registered || state.stopping || self.is_idle(&state) {
                return;
            }
            self.want_current(&mut state);
        }
        self.send().await;
    }

    /// The allocation is stopping or being destroyed: deregisters now, waiting for the attempt
    /// (a failure is retried in the background), and registers nothing afterwards.
    pub async fn deregister(&self) {
        {
            let mut state = lock(&self.state);
            state.stopping = true;
            if self.is_idle(&state) {
                return;
            }
            state.registered = false;
            self.want_current(&mut state);
        }
        self.send().await;
    }

    async fn send(&self) {
        if let Err(error) = self.sync.sync().await {
            tracing::warn!(%error, "group service registration not synced; retrying in the background");
        }
    }

    /// The registrations currently wanted (for tests and inspection).
    pub fn wanted(&self) -> Vec<drover_structs::ServiceRegistration> {
        self.sync.wanted()
    }
}
