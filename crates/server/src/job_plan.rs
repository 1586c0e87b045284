//! `job plan`: what registering a job would do, computed and thrown away. The submitted job is
//! laid over one consistent snapshot of the store as if it were registered (a new version when
//! its spec changed, the stored job otherwise), an evaluation that is never stored is planned by
//! the same pure scheduler the workers run, and the plan is answered, not applied. With `Diff`
//! the job's difference from the stored version comes along, annotated with what the
//! scheduler decided (Nomad's `scheduler.Annotate`).
//!
//! Not here: committing anything (nothing in this module writes to the store or the broker),
//! the diff itself (`drover_structs::job_diff`).

use std::sync::Arc;

use drover_scheduler::{Plan, SchedulerOptions, SchedulerState};
use drover_state::derive::same_job_spec;
use drover_structs::job_diff::{DiffType, JobDiff, TaskDiff, TaskGroupDiff, diff_jobs};
use drover_structs::{
    Allocation, DesiredTgUpdates, EVAL_STATUS_BLOCKED, EVAL_TRIGGER_JOB_REGISTER, Job,
    JobPlanRequest, JobPlanResponse, Node, PlanAnnotations, Timestamp,
};
use rand::Rng;

use crate::snapshot::SnapshotView;
use crate::{ServerError, ServerInner};

/// Nomad's annotations of a plan's diff.
const ANNOTATION_FORCES_CREATE: &str = "forces create";
const ANNOTATION_FORCES_DESTROY: &str = "forces destroy";
const ANNOTATION_FORCES_IN_PLACE: &str = "forces in-place update";
const ANNOTATION_FORCES_DESTRUCTIVE: &str = "forces create/destroy update";

/// The snapshot with the planned job in place of the stored one.
struct PlannedView {
    snapshot: SnapshotView,
    job: Arc<Job>,
}

impl SchedulerState for PlannedView {
    fn job(&self, namespace: &str, job_id: &str) -> Option<Arc<Job>> {
        if namespace == self.job.namespace && job_id == self.job.id {
            Some(Arc::clone(&self.job))
        } else {
            self.snapshot.job(namespace, job_id)
        }
    }

    fn allocs_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Allocation>> {
        self.snapshot.allocs_by_job(namespace, job_id)
    }

    fn node(&self, node_id: &str) -> Option<Arc<Node>> {
        self.snapshot.node(node_id)
    }

    fn nodes(&self) -> Vec<Arc<Node>> {
        self.snapshot.nodes()
    }

    fn allocs_by_node(&self, node_id: &str) -> Vec<Arc<Allocation>> {
        self.snapshot.allocs_by_node(node_id)
    }

    fn latest_deployment(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Option<Arc<drover_structs::Deployment>> {
        self.snapshot.latest_deployment(namespace, job_id)
    }
}

/// Plans a canonicalized job without committing anything.
pub(crate) fn plan_job(
    server: &ServerInner,
    request: JobPlanRequest,
) -> Result<JobPlanResponse, ServerError> {
    let Some(mut submitted) = request.job else {
        return Err(ServerError::BadRequest("Job required for plan".into()));
    };
    if submitted.id.is_empty() {
        return Err(ServerError::BadRequest("Job must have a valid ID".into()));
    }
    submitted.canonicalize();
    if submitted.region.is_empty() {
        submitted.region.clone_from(&server.config.region);
    }
    submitted.stop = false;
    crate::check_job_namespace(&server.state, &submitted)?;

    let snapshot = server.state.snapshot();
    crate::node_pools::check_job_node_pool(&snapshot, &submitted)?;
    let snapshot_index = snapshot.latest_index();
    let stored = snapshot.job(&submitted.namespace, &submitted.id);
    crate::scaling::assign_policy_ids(stored.as_deref(), &mut submitted);
    snapshot.adopt_scaling_policies(&mut submitted);
    if let Some(stored) = &stored
        && stored.r#type != submitted.r#type
    {
        return Err(ServerError::BadRequest(format!(
            "cannot update job from type {:?} to {:?}",
            stored.r#type, submitted.r#type
        )));
    }

    // The job as a register would store it: the stored one when the spec is the same, else a
    // new version at the next index.
    let job_modify_index = stored.as_ref().map_or(0, |stored| stored.job_modify_index);
    let (planned, eval_job_modify_index) = match &stored {
        Some(stored) if same_job_spec(stored, &submitted) => (Arc::clone(stored), 0),
        Some(stored) => {
            let mut planned = submitted.clone();
            let index = snapshot_index + 1;
            planned.version = stored.version + 1;
            planned.create_index = stored.create_index;
            planned.modify_index = index;
            planned.job_modify_index = index;
            planned.status.clone_from(&stored.status);
            (Arc::new(planned), index)
        }
        None => {
            let mut planned = submitted.clone();
            let index = snapshot_index + 1;
            planned.version = 0;
            planned.create_index = index;
            planned.modify_index = index;
            planned.job_modify_index = index;
            (Arc::new(planned), 0)
        }
    };

    let eval = server.new_eval(&planned, EVAL_TRIGGER_JOB_REGISTER, eval_job_modify_index);
    let options = SchedulerOptions {
        seed: rand::thread_rng().r#gen(),
        now_unix_nanos: server.clock.now_unix_ns(),
        scoring: server.config.scoring,
        deployments: true,
    };
    let mut ids = || uuid::Uuid::new_v4().to_string();
    let view = PlannedView {
        snapshot: SnapshotView(snapshot),
        job: planned,
    };
    let plan = drover_scheduler::schedule(&view, &eval, &options, &mut ids)
        .map_err(|error| ServerError::Internal(error.to_string()))?;

    let annotations = plan_annotations(&plan);
    let diff = if request.diff {
        let mut diff = diff_jobs(stored.as_deref(), Some(&submitted), true).map_err(|error| {
            ServerError::Internal(format!("failed to create job diff: {error}"))
        })?;
        annotate(&mut diff, &annotations);
        Some(diff)
    } else {
        None
    };

    let mut created_evals = Vec::new();
    if let Some(mut blocked) = plan.blocked_eval.clone() {
        blocked.status = EVAL_STATUS_BLOCKED.to_owned();
        if blocked.previous_eval.is_empty() {
            blocked.previous_eval.clone_from(&eval.id);
        }
        created_evals.push(blocked);
    }
    created_evals.extend(plan.follow_up_evals.iter().cloned());

    // Nomad's: the next launch of an enabled periodic block, counted from now.
    let next_periodic_launch = match submitted.periodic.as_ref() {
        Some(periodic) if periodic.enabled => {
            let schedule = drover_jobspec::cron::CronSchedule::of(periodic).map_err(|error| {
                ServerError::BadRequest(format!("Failed to parse cron expression: {error}"))
            })?;
            schedule
                .next_after(server.clock.now_unix_ns())
                .map(|next| Timestamp::from_unix_nanos(next.saturating_mul(1_000_000_000)))
        }
        _ => None,
    };

    Ok(JobPlanResponse {
        annotations: Some(annotations),
        next_periodic_launch,
        failed_tg_allocs: (!plan.failed_tg_allocs.is_empty())
            .then(|| plan.failed_tg_allocs.clone()),
        job_modify_index,
        created_evals: (!created_evals.is_empty()).then_some(created_evals),
        diff,
        warnings: String::new(),
        index: job_modify_index,
    })
}

/// The scheduler's per-group counts in Nomad's wire shape.
fn plan_annotations(plan: &Plan) -> PlanAnnotations {
    let desired_tg_updates = plan
        .annotations
        .desired_tg_updates
        .iter()
        .map(|(group, updates)| {
            (
                group.clone(),
                DesiredTgUpdates {
                    ignore: updates.ignore,
                    place: updates.place,
                    migrate: updates.migrate,
                    stop: updates.stop,
                    in_place_update: updates.in_place_update,
                    destructive_update: updates.destructive_update,
                    canary: updates.canary,
                    preemptions: updates.preemptions,
                },
            )
        })
        .collect();
    let preempted_allocs = plan.annotations.preempted_allocs.as_ref().map(|allocs| {
        allocs
            .iter()
            .map(|alloc| alloc.stub_with(false, false))
            .collect()
    });
    PlanAnnotations {
        desired_tg_updates,
        preempted_allocs,
    }
}

/// Nomad's `scheduler.Annotate`: each group's update counts, `forces create`/`forces destroy`
/// on a changed count, and on each changed task whether it forces a destructive or an in-place
/// update.
pub fn annotate(diff: &mut JobDiff, annotations: &PlanAnnotations) {
    for group in &mut diff.task_groups {
        annotate_group(group, annotations);
    }
}

fn annotate_group(group: &mut TaskGroupDiff, annotations: &PlanAnnotations) {
    if let Some(desired) = annotations.desired_tg_updates.get(&group.name) {
        let updates = group.updates.get_or_insert_with(Default::default);
        for (name, count) in [
            ("ignore", desired.ignore),
            ("create", desired.place),
            ("migrate", desired.migrate),
            ("destroy", desired.stop),
            ("canary", desired.canary),
            ("in-place update", desired.in_place_update),
            ("create/destroy update", desired.destructive_update),
        ] {
            if count != 0 {
                updates.insert(name.to_string(), count);
            }
        }
    }
    if let Some(count) = group.fields.iter_mut().find(|field| field.name == "Count") {
        let parse = |text: &str| text.parse::<i64>().unwrap_or(0);
        let (old, new) = (parse(&count.old), parse(&count.new));
        if old < new {
            count.annotations.push(ANNOTATION_FORCES_CREATE.into());
        } else if new < old {
            count.annotations.push(ANNOTATION_FORCES_DESTROY.into());
        }
    }
    let group_type = group.r#type;
    for task in &mut group.tasks {
        annotate_task(task, group_type);
    }
}

fn annotate_task(task: &mut TaskDiff, group_type: DiffType) {
    if task.r#type == DiffType::None {
        return;
    }
    if matches!(group_type, DiffType::Added | DiffType::Deleted) {
        match task.r#type {
            DiffType::Added => {
                task.annotations.push(ANNOTATION_FORCES_CREATE.into());
                return;
            }
            DiffType::Deleted => {
                task.annotations.push(ANNOTATION_FORCES_DESTROY.into());
                return;
            }
            _ => {}
        }
    }
    // Every primitive change but the kill timeout replaces the task; of the blocks, log
    // configuration, services and constraints change in place.
    let destructive = task.fields.iter().any(|field| field.name != "KillTimeout")
        || task
            .objects
            .iter()
            .any(|object| !matches!(object.name.as_str(), "LogConfig" | "Service" | "Constraint"));
    task.annotations.push(
        if destructive {
            ANNOTATION_FORCES_DESTRUCTIVE
        } else {
            ANNOTATION_FORCES_IN_PLACE
        }
        .into(),
    );
}
