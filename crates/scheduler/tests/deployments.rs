//! Rolling updates through deployments on a fake cluster: each test runs passes with
//! deployments on, commits each plan as the store would (the deployment created or updated,
//! its status changes, each new allocation counted as placed and canaries recorded), marks
//! allocations healthy as clients would report, and checks what each pass decides.

// Integration tests: a panic is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use drover_scheduler::reconcile::{STATUS_ALLOC_NOT_NEEDED, STATUS_ALLOC_UPDATING};
use drover_scheduler::testing::{JobBuilder, NodeBuilder};
use drover_scheduler::{
    InMemoryState, Plan, SchedulerOptions, SchedulerState, SeededIds, schedule,
};
use drover_structs::{
    AllocDeploymentStatus, Allocation, DEPLOYMENT_DESC_NEWER_JOB,
    DEPLOYMENT_DESC_RUNNING_NEEDS_PROMOTION, DEPLOYMENT_DESC_STOPPED_JOB,
    DEPLOYMENT_DESC_SUCCESSFUL, DEPLOYMENT_STATUS_CANCELLED, DEPLOYMENT_STATUS_SUCCESSFUL,
    Deployment, Evaluation, Job, UpdateStrategy,
};

const NOW: i64 = 1_700_000_000_000_000_000;

struct Cluster {
    state: InMemoryState,
    next_index: u64,
    passes: u64,
}

impl Cluster {
    fn new(nodes: usize) -> Self {
        let mut state = InMemoryState::new();
        for index in 0..nodes {
            state.upsert_node(NodeBuilder::new(&format!("node-{index:02}")).build());
        }
        Cluster {
            state,
            next_index: 100,
            passes: 0,
        }
    }

    fn register(&mut self, job: &Job) {
        self.state.upsert_job(job.clone());
    }

    fn pass(&mut self, job: &Job) -> Plan {
        self.passes += 1;
        let eval = Evaluation {
            id: format!("eval-{}", self.passes),
            namespace: job.namespace.clone(),
            priority: 50,
            r#type: job.r#type.clone(),
            triggered_by: drover_structs::EVAL_TRIGGER_JOB_REGISTER.to_string(),
            job_id: job.id.clone(),
            status: drover_structs::EVAL_STATUS_PENDING.to_string(),
            ..Evaluation::default()
        };
        let options = SchedulerOptions {
            seed: 7,
            now_unix_nanos: NOW,
            deployments: true,
            ..SchedulerOptions::default()
        };
        schedule(
            &self.state,
            &eval,
            &options,
            &mut SeededIds::new(self.passes * 1000),
        )
        .unwrap()
    }

    /// Commits a plan as the store does and marks new allocations running.
    fn commit(&mut self, plan: &Plan) {
        if let Some(deployment) = &plan.deployment {
            let mut deployment = deployment.clone();
            if deployment.create_index == 0 {
                self.next_index += 1;
                deployment.create_index = self.next_index;
            }
            self.state.upsert_deployment(deployment);
        }
        for update in &plan.deployment_updates {
            let mut deployment =
                Deployment::clone(&self.state.deployment(&update.deployment_id).unwrap());
            deployment.status = update.status.clone();
            deployment.status_description = update.status_description.clone();
            self.state.upsert_deployment(deployment);
        }
        self.state.apply_plan(plan);
        for alloc in plan.allocations() {
            if alloc.client_status == drover_structs::ALLOC_CLIENT_STATUS_PENDING {
                let mut running = alloc.clone();
                running.client_status = drover_structs::ALLOC_CLIENT_STATUS_RUNNING.to_string();
                self.state.upsert_alloc(running);
                if !alloc.deployment_id.is_empty() {
                    let mut deployment =
                        Deployment::clone(&self.state.deployment(&alloc.deployment_id).unwrap());
                    let group = deployment.task_groups.get_mut(&alloc.task_group).unwrap();
                    group.placed_allocs += 1;
                    if alloc
                        .deployment_status
                        .as_ref()
                        .is_some_and(|status| status.canary)
                    {
                        group.placed_canaries.push(alloc.id.clone());
                    }
                    self.state.upsert_deployment(deployment);
                }
            }
        }
    }

    /// Reports every live allocation of the deployment whose health is unknown as `healthy`.
    fn report_health(&mut self, job: &Job, healthy: bool) {
        for alloc in self.live(job) {
            let unknown = alloc
                .deployment_status
                .as_ref()
                .is_none_or(|status| status.healthy.is_none());
            if alloc.deployment_id.is_empty() || !unknown {
                continue;
            }
            let mut reported = alloc.clone();
            let canary = alloc
                .deployment_status
                .as_ref()
                .is_some_and(|status| status.canary);
            reported.deployment_status = Some(AllocDeploymentStatus {
                healthy: Some(healthy),
                canary,
                ..AllocDeploymentStatus::default()
            });
            self.state.upsert_alloc(reported);
            let mut deployment =
                Deployment::clone(&self.state.deployment(&alloc.deployment_id).unwrap());
            let group = deployment.task_groups.get_mut(&alloc.task_group).unwrap();
            if healthy {
                group.healthy_allocs += 1;
            } else {
                group.unhealthy_allocs += 1;
            }
            self.state.upsert_deployment(deployment);
        }
    }

    fn live(&self, job: &Job) -> Vec<Allocation> {
        let mut live: Vec<Allocation> = self
            .state
            .allocs_by_job(&job.namespace, &job.id)
            .iter()
            .filter(|alloc| !alloc.terminal_status())
            .map(|alloc| Allocation::clone(alloc))
            .collect();
        live.sort_by(|a, b| a.name.cmp(&b.name));
        live
    }

    fn latest(&self, job: &Job) -> Deployment {
        Deployment::clone(
            &self
                .state
                .latest_deployment(&job.namespace, &job.id)
                .unwrap(),
        )
    }
}

fn rolling_job(count: i64, max_parallel: i64, canary: i64) -> Job {
    let mut job = JobBuilder::service("web")
        .group("g", count)
        .task("t", "raw_exec")
        .build();
    job.task_groups[0].update = Some(UpdateStrategy {
        max_parallel,
        canary,
        ..drover_structs::canonicalize::default_update_strategy()
    });
    job
}

fn new_version(job: &Job, value: &str) -> Job {
    let mut next = job.clone();
    next.version += 1;
    next.job_modify_index += 10;
    next.modify_index += 10;
    next.task_groups[0].tasks[0]
        .env
        .insert("VERSION".into(), value.into());
    next
}

fn versions(cluster: &Cluster, job: &Job) -> Vec<u64> {
    cluster
        .live(job)
        .iter()
        .map(|alloc| alloc.job.as_ref().unwrap().version)
        .collect()
}

/// A cluster running version 0 of `job`, its first deployment successful.
fn running(job: &Job) -> Cluster {
    let mut cluster = Cluster::new(3);
    cluster.register(job);
    let first = cluster.pass(job);
    let created = first
        .deployment
        .clone()
        .expect("a first version is deployed");
    assert_eq!(
        created.task_groups["g"].desired_total,
        job.task_groups[0].count
    );
    cluster.commit(&first);
    cluster.report_health(job, true);
    let done = cluster.pass(job);
    assert_eq!(done.deployment_updates.len(), 1);
    assert_eq!(
        done.deployment_updates[0].status,
        DEPLOYMENT_STATUS_SUCCESSFUL
    );
    assert_eq!(
        done.deployment_updates[0].status_description,
        DEPLOYMENT_DESC_SUCCESSFUL
    );
    cluster.commit(&done);
    cluster
}

#[test]
fn a_rolling_update_replaces_max_parallel_at_a_time_as_allocations_turn_healthy() {
    let job = rolling_job(4, 1, 0);
    let mut cluster = running(&job);
    let changed = new_version(&job, "2");
    cluster.register(&changed);

    let plan = cluster.pass(&changed);
    let updates = &plan.annotations.desired_tg_updates["g"];
    // Nomad's plan for the default update block: one destructive update, three ignored.
    assert_eq!((updates.destructive_update, updates.ignore), (1, 3));
    let deployment = plan.deployment.clone().expect("a new version is deployed");
    assert_eq!(deployment.job_version, changed.version);
    assert_eq!(deployment.task_groups["g"].desired_total, 4);
    let placed: Vec<&Allocation> = plan.allocations().collect();
    assert_eq!(placed.len(), 1);
    assert_eq!(placed[0].deployment_id, deployment.id);
    assert_eq!(
        plan.stops().next().unwrap().desired_description,
        STATUS_ALLOC_UPDATING
    );
    cluster.commit(&plan);

    // Nothing more until the new allocation is healthy.
    let waiting = cluster.pass(&changed);
    assert!(waiting.is_no_op());
    assert!(waiting.deployment_updates.is_empty());

    for round in 2..=4 {
        cluster.report_health(&changed, true);
        let plan = cluster.pass(&changed);
        assert_eq!(
            plan.annotations.desired_tg_updates["g"].destructive_update, 1,
            "round {round}"
        );
        cluster.commit(&plan);
        let live = versions(&cluster, &changed);
        assert_eq!(live.len(), 4);
        assert_eq!(live.iter().filter(|version| **version == 1).count(), round);
    }
    cluster.report_health(&changed, true);
    let done = cluster.pass(&changed);
    assert!(done.is_no_op());
    assert_eq!(done.deployment_updates.len(), 1);
    assert_eq!(done.deployment_updates[0].deployment_id, deployment.id);
    assert_eq!(
        done.deployment_updates[0].status,
        DEPLOYMENT_STATUS_SUCCESSFUL
    );
}

#[test]
fn max_parallel_two_replaces_two_and_an_unhealthy_allocation_stops_the_rollout() {
    let job = rolling_job(4, 2, 0);
    let mut cluster = running(&job);
    let changed = new_version(&job, "2");
    cluster.register(&changed);
    let plan = cluster.pass(&changed);
    assert_eq!(
        plan.annotations.desired_tg_updates["g"].destructive_update,
        2
    );
    cluster.commit(&plan);
    cluster.report_health(&changed, false);
    let stuck = cluster.pass(&changed);
    assert!(stuck.is_no_op());
    assert_eq!(stuck.annotations.desired_tg_updates["g"].ignore, 4);
}

#[test]
fn a_canary_runs_beside_the_old_allocations_until_promoted_then_the_rest_roll() {
    let job = rolling_job(4, 1, 1);
    let mut cluster = running(&job);
    let changed = new_version(&job, "2");
    cluster.register(&changed);

    let plan = cluster.pass(&changed);
    let updates = &plan.annotations.desired_tg_updates["g"];
    assert_eq!(
        (updates.canary, updates.destructive_update, updates.ignore),
        (1, 0, 4)
    );
    assert!(plan.stops().next().is_none());
    let deployment = plan.deployment.clone().unwrap();
    assert_eq!(deployment.task_groups["g"].desired_canaries, 1);
    assert_eq!(
        deployment.status_description,
        DEPLOYMENT_DESC_RUNNING_NEEDS_PROMOTION
    );
    let canary: Vec<&Allocation> = plan.allocations().collect();
    assert_eq!(canary.len(), 1);
    assert!(canary[0].deployment_status.as_ref().unwrap().canary);
    assert_eq!(canary[0].name, "web.g[0]");
    cluster.commit(&plan);
    assert_eq!(versions(&cluster, &changed), vec![0, 1, 0, 0, 0]);

    // Healthy but not promoted: the canary waits beside the four old allocations.
    cluster.report_health(&changed, true);
    let waiting = cluster.pass(&changed);
    assert!(waiting.is_no_op());
    assert!(waiting.deployment_updates.is_empty());

    let mut promoted = cluster.latest(&changed);
    promoted.task_groups.get_mut("g").unwrap().promoted = true;
    cluster.state.upsert_deployment(promoted);
    let plan = cluster.pass(&changed);
    let stopped: Vec<(&str, &str)> = plan
        .stops()
        .map(|alloc| (alloc.name.as_str(), alloc.desired_description.as_str()))
        .collect();
    assert!(
        stopped.contains(&("web.g[0]", STATUS_ALLOC_NOT_NEEDED)),
        "{stopped:?}"
    );
    assert_eq!(
        plan.annotations.desired_tg_updates["g"].destructive_update,
        1
    );
    cluster.commit(&plan);
    assert_eq!(versions(&cluster, &changed).len(), 4);
    for _ in 0..2 {
        cluster.report_health(&changed, true);
        let plan = cluster.pass(&changed);
        assert_eq!(
            plan.annotations.desired_tg_updates["g"].destructive_update,
            1
        );
        cluster.commit(&plan);
    }
    cluster.report_health(&changed, true);
    let done = cluster.pass(&changed);
    assert_eq!(versions(&cluster, &changed), vec![1, 1, 1, 1]);
    assert_eq!(
        done.deployment_updates[0].status,
        DEPLOYMENT_STATUS_SUCCESSFUL
    );
}

#[test]
fn a_newer_version_cancels_the_running_deployment_and_stops_its_canaries() {
    let job = rolling_job(3, 1, 1);
    let mut cluster = running(&job);
    let second = new_version(&job, "2");
    cluster.register(&second);
    let plan = cluster.pass(&second);
    let first_deployment = plan.deployment.clone().unwrap();
    cluster.commit(&plan);

    let third = new_version(&second, "3");
    cluster.register(&third);
    let plan = cluster.pass(&third);
    assert_eq!(plan.deployment_updates.len(), 1);
    assert_eq!(
        plan.deployment_updates[0].deployment_id,
        first_deployment.id
    );
    assert_eq!(
        plan.deployment_updates[0].status,
        DEPLOYMENT_STATUS_CANCELLED
    );
    assert_eq!(
        plan.deployment_updates[0].status_description,
        DEPLOYMENT_DESC_NEWER_JOB
    );
    let new_deployment = plan.deployment.clone().unwrap();
    assert_ne!(new_deployment.id, first_deployment.id);
    assert_eq!(new_deployment.job_version, third.version);
    // The unpromoted canary of version 1 is stopped, a canary of version 2 placed.
    let stopped: Vec<&Allocation> = plan.stops().collect();
    assert_eq!(stopped.len(), 1);
    assert_eq!(stopped[0].job.as_ref().unwrap().version, 1);
    let placed: Vec<&Allocation> = plan.allocations().collect();
    assert_eq!(placed.len(), 1);
    assert_eq!(placed[0].job.as_ref().unwrap().version, 2);
}

#[test]
fn stopping_the_job_cancels_its_deployment() {
    let job = rolling_job(2, 1, 0);
    let mut cluster = running(&job);
    let changed = new_version(&job, "2");
    cluster.register(&changed);
    let plan = cluster.pass(&changed);
    cluster.commit(&plan);
    let mut stopped = changed.clone();
    stopped.stop = true;
    cluster.register(&stopped);
    let plan = cluster.pass(&stopped);
    assert_eq!(plan.deployment_updates.len(), 1);
    assert_eq!(
        plan.deployment_updates[0].status,
        DEPLOYMENT_STATUS_CANCELLED
    );
    assert_eq!(
        plan.deployment_updates[0].status_description,
        DEPLOYMENT_DESC_STOPPED_JOB
    );
    assert_eq!(plan.stops().count(), 2);
}

#[test]
fn without_deployments_every_destructive_update_happens_at_once() {
    let job = rolling_job(4, 1, 0);
    let mut state = InMemoryState::new();
    state.upsert_node(NodeBuilder::new("node-00").build());
    state.upsert_job(job.clone());
    let eval = Evaluation {
        id: "e1".into(),
        namespace: job.namespace.clone(),
        r#type: job.r#type.clone(),
        job_id: job.id.clone(),
        status: drover_structs::EVAL_STATUS_PENDING.to_string(),
        ..Evaluation::default()
    };
    let options = SchedulerOptions {
        now_unix_nanos: NOW,
        ..SchedulerOptions::default()
    };
    let plan = schedule(&state, &eval, &options, &mut SeededIds::new(1)).unwrap();
    assert!(plan.deployment.is_none());
    assert!(
        plan.allocations()
            .all(|alloc| alloc.deployment_id.is_empty())
    );
    state.apply_plan(&plan);
    let changed = new_version(&job, "2");
    state.upsert_job(changed.clone());
    let plan = schedule(&state, &eval, &options, &mut SeededIds::new(2)).unwrap();
    assert_eq!(
        plan.annotations.desired_tg_updates["g"].destructive_update,
        4
    );
    assert!(plan.deployment.is_none());
}
