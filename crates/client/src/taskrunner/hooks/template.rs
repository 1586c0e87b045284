//! The template hook: renders the task's `template` blocks into its task dir before every start
//! (the first render blocks the start; an error fails the task, naming the destination and the
//! line:column), adds the variables of `env = true` templates to the task's environment, and,
//! while the task runs, re-renders templates that read files (`file`, or a `source` file) and
//! applies their `change_mode` when the output changes: `noop` only rewrites the file,
//! `restart` restarts the task, `signal` sends `change_signal`, after a random `splay`.
//!
//! Templates that read Nomad Variables (`nomadVar*`) or the built-in service catalog
//! (`nomadService`, `nomadServices`) read them from the servers with the task's default
//! workload identity: a render that wants a path or query not fetched yet has it fetched and
//! renders again; a `nomadVar` of a variable that does not exist holds the start, waiting for
//! it with a blocking query, as Nomad's template blocks on it, while a service with no
//! registrations renders as an empty list. While the task runs, each read a template made is
//! watched as consul-template's Nomad dependencies are: a blocking query (`index` + `wait`,
//! the client's `block_query_wait`, 5 minutes by default) answers once the data changed, a
//! changed answer wakes the render loop at once, an answer at an older index starts over from
//! index 0, queries are at least 100 ms apart, and a failing one is retried with backoff
//! (Nomad's `nomad_retry`: 12 attempts from 250 ms, at most a minute apart) before the task is
//! killed with "Template failed".
//!
//! The first render is written at once. Later, a changed output (and its change mode) is held
//! as consul-template's quiescence holds it: until it has stayed the same for `min`, or
//! changes have been held for `max` — the template's own `wait { min max }` within the
//! client's `wait_bounds`, else the client's `template { wait }` (Nomad's default: 5 s and
//! 4 min). `change_mode = "script"` runs `change_script` inside the task through the shim's
//! exec path (the one `alloc exec` and script checks take), with Nomad's events, killing the
//! task when it fails under `fail_on_error`; with `run_on_first_render` it also runs once the
//! task has started after the first render (the hook's poststart), and after a restart only
//! when `render_templates` has the templates rendered again, as Nomad's poststart runs it.
//!
//! Templates that read only `env` cannot change while the task runs and are not watched, nor
//! are `once` templates. Templates that read files are rendered again every
//! [`WATCH_INTERVAL`] on tokio time (paused in tests); the others only when their data
//! changed.
//!
//! **Not** here: the engine and functions (`crate::template`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drover_structs::Template;
use tokio_util::sync::CancellationToken;

use super::{
    HookError, HookErrorKind, HookFuture, HookResult, PoststartHook, PoststartRequest,
    PoststartResponse, PrestartHook, PrestartRequest, PrestartResponse, StopHook, StopRequest,
    StopResponse, TaskEventEmitter, TaskHook, TaskLifecycleHandle, UpdateHook, UpdateRequest,
    UpdateResponse,
};
use crate::allocdir::TaskDir;
use crate::identity::IdentitySigner;
use crate::server_conn::{Blocking, Indexed};
use crate::taskrunner::hooks::identity::{DEFAULT_IDENTITY, TaskTokens};
use crate::template::funcs::{ServiceQuery, VariableCache};
use crate::template::{self, RenderScope, TemplateText, beneath};

/// How often templates that read files are re-rendered while the task runs.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(250);

/// The shortest time between two queries of one dependency (consul-template's
/// `minDelayBetweenUpdates`).
const MIN_QUERY_INTERVAL: Duration = Duration::from_millis(100);

/// Nomad's default `nomad_retry`: attempts, first backoff and largest backoff of a failing
/// query before the template fails.
const QUERY_RETRY_ATTEMPTS: u32 = 12;
const QUERY_RETRY_BACKOFF: Duration = Duration::from_millis(250);
const QUERY_RETRY_MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Renders before a template that keeps wanting new variables is refused.
const MAX_VARIABLE_PASSES: usize = 16;

/// Where templates read Nomad Variables: the servers, with the task's default identity.
#[derive(Debug, Clone)]
pub struct VariableSource {
    pub reader: Arc<dyn IdentitySigner>,
    pub tokens: TaskTokens,
    pub namespace: String,
}

/// Whether `template` reads Nomad Variables or services with the task's identity (its text
/// names a `nomadVar` or `nomadService` function).
pub fn reads_variables(template: &Template) -> bool {
    template.embedded_tmpl.contains("nomadVar") || template.embedded_tmpl.contains("nomadService")
}

/// One read a template depends on (one of consul-template's Nomad dependencies).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Dependency {
    /// `nomadVar` / `nomadVarExists` of a path.
    Variable(String),
    /// `nomadVarList` of a prefix.
    VariableList(String),
    /// `nomadService`.
    Service(ServiceQuery),
    /// `nomadServices` of a namespace (`None`: the task's).
    ServiceList(Option<String>),
}

/// What one query of a [`Dependency`] answered.
enum Answer {
    Variable(Option<drover_structs::Variable>),
    VariableList(Vec<drover_structs::VariableMetadata>),
    Service(Vec<drover_structs::ServiceRegistration>),
    ServiceList(Vec<drover_structs::service_catalog::ServiceRegistrationListStub>),
}

/// The dependencies a render asked for that `cache` does not hold yet, taken out of it.
fn take_wanted(cache: &mut VariableCache) -> Vec<Dependency> {
    let mut wanted: Vec<Dependency> = std::mem::take(&mut cache.wanted_reads)
        .into_iter()
        .map(Dependency::Variable)
        .collect();
    wanted.extend(
        std::mem::take(&mut cache.wanted_lists)
            .into_iter()
            .map(Dependency::VariableList),
    );
    wanted.extend(
        std::mem::take(&mut cache.wanted_services)
            .into_iter()
            .map(Dependency::Service),
    );
    wanted.extend(
        std::mem::take(&mut cache.wanted_service_lists)
            .into_iter()
            .map(Dependency::ServiceList),
    );
    wanted
}

/// How long a changed output of `template` is held back, as `(min, max)`: its own `wait`
/// (max four times min when left out, as consul-template) within the client's
/// `wait_bounds`, else the client's `wait`. `None` when nothing holds it.
pub fn wait_bounds(
    template: &Template,
    config: crate::config::TemplateConfig,
) -> Option<(Duration, Duration)> {
    let Some(wait) = template.wait.as_ref() else {
        return config.wait;
    };
    let nanos = |field: &str| {
        wait.get(field)
            .and_then(serde_json::Value::as_u64)
            .map(Duration::from_nanos)
    };
    let min = nanos("Min").unwrap_or_default();
    let max = nanos("Max").unwrap_or(min.saturating_mul(4));
    let (min, max) = config.wait_bounds.clamp((min, max.max(min)));
    (!min.is_zero() || !max.is_zero()).then_some((min, max))
}

/// A changed output held back by a template's `wait`.
#[derive(Debug, Clone)]
struct Pending {
    output: String,
    /// When the first change after the last write was seen.
    first: tokio::time::Instant,
    /// When the output last changed.
    changed: tokio::time::Instant,
}

/// What the watch loop keeps for one template.
struct Watched {
    template: Template,
    /// The output last written.
    last: String,
    wait: Option<(Duration, Duration)>,
    pending: Option<Pending>,
    /// Whether the last render read files (the loop then polls it).
    reads_files: bool,
}

impl Watched {
    fn new(template: Template, rendered: Rendered, config: crate::config::TemplateConfig) -> Self {
        Watched {
            wait: wait_bounds(&template, config),
            template,
            last: rendered.output,
            pending: None,
            reads_files: rendered.reads_files,
        }
    }

    /// The output to write now, given this poll's `output`: at once without a wait; with
    /// one, once the output has stayed the same for `min` or changes have been held `max`.
    fn settle(&mut self, output: String, now: tokio::time::Instant) -> Option<String> {
        if output == self.last {
            self.pending = None;
            return None;
        }
        let Some((min, max)) = self.wait else {
            return Some(output);
        };
        let pending = match self.pending.take() {
            Some(pending) if pending.output == output => pending,
            Some(pending) => Pending {
                output,
                first: pending.first,
                changed: now,
            },
            None => Pending {
                output,
                first: now,
                changed: now,
            },
        };
        if now.duration_since(pending.changed) >= min || now.duration_since(pending.first) >= max {
            return Some(pending.output);
        }
        self.pending = Some(pending);
        None
    }
}

/// A template's `change_script`: run inside the task when the template changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeScript {
    pub command: String,
    pub args: Vec<String>,
    pub timeout: Duration,
    /// A failed script kills the task (failing it).
    pub fail_on_error: bool,
    /// Run once after the first render too, when the task has started.
    pub run_on_first_render: bool,
}

/// Nomad's default `change_script.timeout`.
const DEFAULT_SCRIPT_TIMEOUT: Duration = Duration::from_secs(5);

impl ChangeScript {
    /// The `ChangeScript` of `template`, when it has one with a command.
    pub fn of(template: &Template) -> Option<ChangeScript> {
        let script = template.change_script.as_ref()?;
        let command = script.get("Command")?.as_str()?.to_string();
        if command.is_empty() {
            return None;
        }
        let args = script
            .get("Args")
            .and_then(serde_json::Value::as_array)
            .map(|args| {
                args.iter()
                    .filter_map(|arg| arg.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let timeout = script
            .get("Timeout")
            .and_then(serde_json::Value::as_u64)
            .filter(|nanos| *nanos > 0)
            .map_or(DEFAULT_SCRIPT_TIMEOUT, Duration::from_nanos);
        let flag = |field: &str| {
            script
                .get(field)
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false)
        };
        Some(ChangeScript {
            command,
            args,
            timeout,
            fail_on_error: flag("FailOnError"),
            run_on_first_render: flag("RunOnFirstRender"),
        })
    }

    /// The arguments as Go's `%v` prints a string slice (`[a b]`), for Nomad's event texts.
    fn args_text(&self) -> String {
        format!("[{}]", self.args.join(" "))
    }
}

/// Runs `script` inside the task (through the shim's exec path) and reports as Nomad does:
/// a "Task hook message" event on exit 0, else a "Task hook failed" event, and with
/// `fail_on_error` the task is killed and fails.
async fn run_change_script(
    script: &ChangeScript,
    shim_binary: Option<&std::path::Path>,
    events: &TaskEventEmitter,
    lifecycle: &TaskLifecycleHandle,
) {
    use crate::taskrunner::exec_context::{ScriptError, ScriptRun, run_in_task};
    let failed_to_run = |error: &str, code: i32| {
        format!(
            "Template failed to run script {} with arguments {} on change: {error}. Exit code: {code}",
            script.command,
            script.args_text()
        )
    };
    let outcome = match (
        lifecycle.exec_context(),
        drover_driver::locate_shim_binary(shim_binary),
    ) {
        (None, _) => Err(failed_to_run("the task is not running", 0)),
        (Some(_), Err(error)) => Err(failed_to_run(&error.to_string(), 0)),
        (Some(context), Ok(shim)) => {
            let mut command = vec![script.command.clone()];
            command.extend(script.args.iter().cloned());
            match run_in_task(shim, context, command, script.timeout).await {
                Ok(ScriptRun { code: 0, .. }) => Ok(()),
                Ok(ScriptRun { code, output }) => {
                    tracing::debug!(%output, code, "template change_script failed");
                    Err(format!(
                        "Template ran script {} with arguments {} on change but it exited with code: {code}",
                        script.command,
                        script.args_text()
                    ))
                }
                Err(ScriptError::TimedOut) => Err(failed_to_run(
                    &format!("timed out after {:?}", script.timeout),
                    0,
                )),
                Err(ScriptError::Failed(message)) => Err(failed_to_run(&message, 0)),
            }
        }
    };
    match outcome {
        Ok(()) => events.emit(
            events
                .event(drover_structs::TASK_HOOK_MESSAGE)
                .with_display_message(&format!(
                    "Template successfully ran script {} with arguments: {}. Exit code: 0",
                    script.command,
                    script.args_text()
                )),
        ),
        Err(message) => {
            events.emit(
                events
                    .event(drover_structs::TASK_HOOK_FAILED)
                    .with_display_message(&message),
            );
            if script.fail_on_error {
                lifecycle.request_kill(
                    "template",
                    "Template script failed, task is being killed",
                    true,
                );
            }
        }
    }
}

/// What the templates of one task read from the servers, shared by the renders and the
/// views that keep it fresh.
#[derive(Default)]
struct TemplateData {
    fetched: Mutex<Fetched>,
    /// Woken when a view stored a changed answer.
    changed: tokio::sync::Notify,
}

#[derive(Default)]
struct Fetched {
    cache: VariableCache,
    /// The index each dependency was last read at.
    indexes: BTreeMap<Dependency, u64>,
    /// The dependencies a view watches.
    watched: std::collections::BTreeSet<Dependency>,
}

type SharedData = Arc<TemplateData>;

impl TemplateData {
    fn lock(&self) -> std::sync::MutexGuard<'_, Fetched> {
        match self.fetched.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// What a render reads: the fetched answers, nothing wanted yet.
    fn snapshot(&self) -> VariableCache {
        let guard = self.lock();
        VariableCache {
            reads: guard.cache.reads.clone(),
            lists: guard.cache.lists.clone(),
            services: guard.cache.services.clone(),
            service_lists: guard.cache.service_lists.clone(),
            ..VariableCache::default()
        }
    }

    fn index_of(&self, dependency: &Dependency) -> u64 {
        self.lock().indexes.get(dependency).copied().unwrap_or(0)
    }

    /// Stores `answer` read at `index`; answers whether renders now see something else.
    fn store(&self, dependency: &Dependency, answer: Answer, index: u64) -> bool {
        let mut guard = self.lock();
        guard.indexes.insert(dependency.clone(), index);
        let cache = &mut guard.cache;
        match (dependency, answer) {
            (Dependency::Variable(path), Answer::Variable(value)) => {
                let changed = cache.reads.get(path) != Some(&value);
                cache.reads.insert(path.clone(), value);
                changed
            }
            (Dependency::VariableList(prefix), Answer::VariableList(value)) => {
                let changed = cache.lists.get(prefix) != Some(&value);
                cache.lists.insert(prefix.clone(), value);
                changed
            }
            (Dependency::Service(query), Answer::Service(value)) => {
                let changed = cache.services.get(query) != Some(&value);
                cache.services.insert(query.clone(), value);
                changed
            }
            (Dependency::ServiceList(namespace), Answer::ServiceList(value)) => {
                let changed = cache.service_lists.get(namespace) != Some(&value);
                cache.service_lists.insert(namespace.clone(), value);
                changed
            }
            _ => false,
        }
    }
}

/// One query of `dependency` with the task's identity, blocking as `blocking` says.
async fn query(
    source: &VariableSource,
    dependency: &Dependency,
    blocking: Blocking,
) -> Result<Indexed<Answer>, String> {
    let token = source.tokens.get(DEFAULT_IDENTITY).ok_or(
        "the task has no workload identity to read Nomad Variables or services with \
         (nomadVar and nomadService need the template's text to name them)",
    )?;
    let reader = &source.reader;
    let own = source.namespace.as_str();
    let indexed = |index: u64, answer: Answer| Indexed {
        value: answer,
        index,
    };
    match dependency {
        Dependency::Variable(path) => reader
            .read_variable(&token, own, path, blocking)
            .await
            .map(|read| indexed(read.index, Answer::Variable(read.value)))
            .map_err(|error| format!("nomadVar {path:?}: {error}")),
        Dependency::VariableList(prefix) => reader
            .list_variables(&token, own, prefix, blocking)
            .await
            .map(|read| indexed(read.index, Answer::VariableList(read.value)))
            .map_err(|error| format!("nomadVarList {prefix:?}: {error}")),
        Dependency::Service(service) => reader
            .read_service(
                &token,
                service.namespace.as_deref().unwrap_or(own),
                &service.name,
                service.choose.as_deref(),
                blocking,
            )
            .await
            .map(|read| indexed(read.index, Answer::Service(read.value)))
            .map_err(|error| format!("nomadService {:?}: {error}", service.name)),
        Dependency::ServiceList(namespace) => reader
            .list_services(&token, namespace.as_deref().unwrap_or(own), blocking)
            .await
            .map(|read| indexed(read.index, Answer::ServiceList(read.value)))
            .map_err(|error| format!("nomadServices: {error}")),
    }
}

/// Fetches `wanted` into `data` at once (no blocking), with the index each was read at.
async fn fetch(
    source: Option<&VariableSource>,
    data: &TemplateData,
    wanted: &[Dependency],
) -> Result<(), String> {
    let source = source.ok_or("this client reads no Nomad Variables or services for templates")?;
    for dependency in wanted {
        let answer = query(source, dependency, Blocking::default()).await?;
        data.store(dependency, answer.value, answer.index);
    }
    Ok(())
}

/// What the views of one task's templates work with.
#[derive(Clone)]
struct ViewContext {
    source: VariableSource,
    data: SharedData,
    block_query_wait: Duration,
    lifecycle: TaskLifecycleHandle,
    cancel: CancellationToken,
}

/// Starts a view for each dependency `data` holds that none watches yet.
fn start_views(context: &ViewContext) {
    let unwatched: Vec<Dependency> = {
        let mut guard = context.data.lock();
        let fetched: Vec<Dependency> = guard.indexes.keys().cloned().collect();
        fetched
            .into_iter()
            .filter(|dependency| guard.watched.insert(dependency.clone()))
            .collect()
    };
    for dependency in unwatched {
        tokio::spawn(view(dependency, context.clone()));
    }
}

/// Keeps `dependency` fresh with blocking queries until cancelled, as consul-template's view
/// does: see the module docs.
async fn view(dependency: Dependency, context: ViewContext) {
    let mut index = context.data.index_of(&dependency);
    let mut failures = 0u32;
    loop {
        let started = tokio::time::Instant::now();
        let blocking = Blocking {
            min_index: index,
            max_wait: context.block_query_wait,
        };
        let answer = tokio::select! {
            biased;
            () = context.cancel.cancelled() => return,
            answer = query(&context.source, &dependency, blocking) => answer,
        };
        let pause = match answer {
            Ok(answer) => {
                failures = 0;
                if answer.index < index {
                    // The servers' index went back (a new cluster): start over.
                    index = 0;
                } else if answer.index != index {
                    index = answer.index;
                    if context.data.store(&dependency, answer.value, index) {
                        context.data.changed.notify_one();
                    }
                }
                MIN_QUERY_INTERVAL.saturating_sub(started.elapsed())
            }
            Err(message) => {
                failures += 1;
                if failures > QUERY_RETRY_ATTEMPTS {
                    context.lifecycle.request_kill(
                        "template",
                        &format!("Template failed: {message}"),
                        true,
                    );
                    return;
                }
                tracing::debug!(%message, failures, "template query failed; retrying");
                QUERY_RETRY_BACKOFF
                    .saturating_mul(1 << (failures - 1).min(16))
                    .min(QUERY_RETRY_MAX_BACKOFF)
            }
        };
        if !pause.is_zero() {
            tokio::select! {
                biased;
                () = context.cancel.cancelled() => return,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }
}

/// Nomad's event text for variables a first render waits for: consul-template's name of each
/// blocking read (`nomad.var.block(<path>@<namespace>.<region>)`), sorted, the first three and
/// "and N more".
fn missing_message(
    absent: &std::collections::BTreeSet<String>,
    env: &BTreeMap<String, String>,
) -> String {
    const SHOWN: usize = 3;
    let of = |name: &str, default: &'static str| {
        env.get(name)
            .filter(|value| !value.is_empty())
            .map_or(default, String::as_str)
            .to_owned()
    };
    let (namespace, region) = (
        of("NOMAD_NAMESPACE", "default"),
        of("NOMAD_REGION", "global"),
    );
    let mut names: Vec<String> = absent
        .iter()
        .map(|path| format!("nomad.var.block({path}@{namespace}.{region})"))
        .collect();
    names.sort();
    if names.len() > SHOWN {
        let more = names.len() - SHOWN;
        names.truncate(SHOWN);
        names.push(format!("and {more} more"));
    }
    format!("Missing: {}", names.join(", "))
}

/// Where a render before the start reads the servers.
struct Reads<'a> {
    source: Option<&'a VariableSource>,
    data: &'a TemplateData,
    block_query_wait: Duration,
}

/// Renders `template`, fetching the variables it wants until it wants no more; a variable
/// that does not exist is waited for with a blocking query (until `cancel`).
async fn render_with_variables(
    template: &Template,
    task_dir: &TaskDir,
    env: &BTreeMap<String, String>,
    reads: &Reads<'_>,
    cancel: &CancellationToken,
    events: &TaskEventEmitter,
) -> Result<Rendered, String> {
    let mut passes = 0;
    let mut reported_missing = false;
    loop {
        let (result, mut used) = render_one(template, task_dir, env, reads.data.snapshot());
        let wanted = take_wanted(&mut used);
        if !wanted.is_empty() {
            passes += 1;
            if passes > MAX_VARIABLE_PASSES {
                return Err(format!(
                    "template {}: still wants new variables after {MAX_VARIABLE_PASSES} renders",
                    template.dest_path
                ));
            }
            fetch(reads.source, reads.data, &wanted).await?;
            continue;
        }
        match result {
            Ok(rendered) => return Ok(rendered),
            Err(message) => {
                let Some(path) = used.absent.first().cloned() else {
                    return Err(message);
                };
                if !reported_missing {
                    reported_missing = true;
                    events.emit(
                        events
                            .event("Template")
                            .with_message(&missing_message(&used.absent, env)),
                    );
                }
                tracing::debug!(%message, "template waits for variables");
                let source = reads
                    .source
                    .ok_or("this client reads no Nomad Variables or services for templates")?;
                let dependency = Dependency::Variable(path);
                let blocking = Blocking {
                    min_index: reads.data.index_of(&dependency).max(1),
                    max_wait: reads.block_query_wait,
                };
                let started = tokio::time::Instant::now();
                let answer = tokio::select! {
                    () = cancel.cancelled() => return Err(message),
                    answer = query(source, &dependency, blocking) => answer?,
                };
                reads.data.store(&dependency, answer.value, answer.index);
                tokio::time::sleep(MIN_QUERY_INTERVAL.saturating_sub(started.elapsed())).await;
            }
        }
    }
}

/// See the module docs.
pub struct TemplateHook {
    templates: Vec<Template>,
    task_dir: TaskDir,
    events: TaskEventEmitter,
    lifecycle: TaskLifecycleHandle,
    env: Arc<Mutex<BTreeMap<String, String>>>,
    watcher: Mutex<Option<CancellationToken>>,
    variables: Option<VariableSource>,
    data: SharedData,
    /// The shim a `change_script` runs through (`None`: found next to the agent).
    shim_binary: Option<std::path::PathBuf>,
    /// The client's `template { … }` settings.
    config: crate::config::TemplateConfig,
    /// Whether a prestart rendered before (a later one is a restart's).
    rendered_before: std::sync::atomic::AtomicBool,
    /// `change_script`s with `run_on_first_render` that the next poststart runs.
    first_render_scripts: Mutex<Vec<ChangeScript>>,
}

impl TemplateHook {
    pub fn new(
        templates: Vec<Template>,
        task_dir: TaskDir,
        events: TaskEventEmitter,
        lifecycle: TaskLifecycleHandle,
    ) -> Self {
        TemplateHook {
            templates,
            task_dir,
            events,
            lifecycle,
            env: Arc::default(),
            watcher: Mutex::new(None),
            variables: None,
            data: Arc::default(),
            shim_binary: None,
            config: crate::config::TemplateConfig::default(),
            rendered_before: std::sync::atomic::AtomicBool::new(false),
            first_render_scripts: Mutex::new(Vec::new()),
        }
    }

    /// The same hook, with the client's `template { … }` settings.
    pub fn with_config(mut self, config: crate::config::TemplateConfig) -> Self {
        self.config = config;
        self
    }

    /// The same hook, running `change_script`s through the shim at `shim_binary`.
    pub fn with_shim_binary(mut self, shim_binary: Option<std::path::PathBuf>) -> Self {
        self.shim_binary = shim_binary;
        self
    }

    /// The same hook, reading Nomad Variables from `source`.
    pub fn with_variables(mut self, source: VariableSource) -> Self {
        self.variables = Some(source);
        self
    }

    fn replace_watcher(&self, next: Option<CancellationToken>) {
        let mut guard = match self.watcher.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(previous) = std::mem::replace(&mut *guard, next) {
            previous.cancel();
        }
    }
}

/// One render of one template: its output and whether it read files or variables.
struct Rendered {
    output: String,
    reads_files: bool,
    reads_variables: bool,
}

/// Renders `template` with `variables` as fetched; answers what the render did with them too.
fn render_one(
    template: &Template,
    task_dir: &TaskDir,
    env: &BTreeMap<String, String>,
    variables: VariableCache,
) -> (Result<Rendered, String>, VariableCache) {
    let (text, from_source) = if template.source_path.is_empty() {
        (template.embedded_tmpl.clone(), false)
    } else {
        match beneath::read_to_string(&task_dir.dir, &template.source_path) {
            Ok(text) => (text, true),
            Err(error) => return (Err(format!("template source {error}")), variables),
        }
    };
    let scope = RenderScope {
        env: env.clone(),
        task_dir: task_dir.dir.clone(),
        files_read: Vec::new(),
        variables,
    };
    let (result, scope) = template::render(
        TemplateText {
            destination: &template.dest_path,
            text: &text,
            left_delimiter: &template.left_delim,
            right_delimiter: &template.right_delim,
            error_on_missing_key: template.err_missing_key,
        },
        scope,
    );
    let rendered = result
        .map_err(|error| error.to_string())
        .map(|output| Rendered {
            output,
            reads_files: from_source || !scope.files_read.is_empty(),
            reads_variables: scope.variables.used,
        });
    (rendered, scope.variables)
}

fn write_one(template: &Template, task_dir: &TaskDir, output: &str) -> Result<(), String> {
    let perms = if template.perms.is_empty() {
        "0644"
    } else {
        &template.perms
    };
    let mode = u32::from_str_radix(perms, 8)
        .map_err(|_| format!("template {}: invalid perms {perms:?}", template.dest_path))?;
    let id = |value: Option<i64>| value.and_then(|id| u32::try_from(id).ok());
    beneath::write_atomic(
        &task_dir.dir,
        &template.dest_path,
        output.as_bytes(),
        beneath::WriteOptions {
            mode,
            uid: id(template.uid),
            gid: id(template.gid),
        },
    )
    .map_err(|error| format!("template destination {error}"))
}

/// `template` with `${…}` interpolated in its source and destination; a path that then names
/// a place inside the task dir by its absolute host path (`${NOMAD_SECRETS_DIR}/x` under
/// raw_exec) is made relative to the task dir. Any other path is read task-dir relative.
fn resolve_paths(
    template: &Template,
    env: &crate::taskenv::TaskEnv,
    task_dir: &TaskDir,
) -> Template {
    let resolve = |path: &str| {
        let interpolated = env.interpolate(path);
        match std::path::Path::new(&interpolated).strip_prefix(&task_dir.dir) {
            Ok(inside) => inside.display().to_string(),
            Err(_) => interpolated,
        }
    };
    let mut resolved = template.clone();
    resolved.dest_path = resolve(&template.dest_path);
    if !template.source_path.is_empty() {
        resolved.source_path = resolve(&template.source_path);
    }
    resolved
}

fn render_failed(message: String) -> HookError {
    HookError::new(HookErrorKind::Unrecoverable, message)
}

impl TaskHook for TemplateHook {
    fn name(&self) -> &'static str {
        "template"
    }
    fn as_prestart(&self) -> Option<&dyn PrestartHook> {
        Some(self)
    }
    fn as_poststart(&self) -> Option<&dyn PoststartHook> {
        Some(self)
    }
    fn as_update(&self) -> Option<&dyn UpdateHook> {
        Some(self)
    }
    fn as_stop(&self) -> Option<&dyn StopHook> {
        Some(self)
    }
}

impl PrestartHook for TemplateHook {
    fn prestart<'a>(
        &'a self,
        cancel: &'a CancellationToken,
        request: &'a PrestartRequest,
        response: &'a mut PrestartResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            let env = request.task_env.env.clone();
            if let Ok(mut shared) = self.env.lock() {
                shared.clone_from(&env);
            }
            let mut watched = Vec::new();
            let templates: Vec<Template> = self
                .templates
                .iter()
                .map(|template| resolve_paths(template, &request.task_env, &self.task_dir))
                .collect();
            let reads = Reads {
                source: self.variables.as_ref(),
                data: &self.data,
                block_query_wait: self.config.block_query_wait,
            };
            for template in &templates {
                let rendered = render_with_variables(
                    template,
                    &self.task_dir,
                    &env,
                    &reads,
                    cancel,
                    &self.events,
                )
                .await
                .map_err(|message| {
                    self.events.emit(
                        self.events
                            .event("Template")
                            .with_message(&format!("Template failed: {message}")),
                    );
                    render_failed(message)
                })?;
                write_one(template, &self.task_dir, &rendered.output).map_err(render_failed)?;
                if template.envvars {
                    let variables =
                        template::parse_env_file(&rendered.output).map_err(|error| {
                            render_failed(format!(
                                "template {}: env file: {error}",
                                template.dest_path
                            ))
                        })?;
                    response.env.extend(variables);
                }
                if (rendered.reads_files || rendered.reads_variables) && !template.once {
                    watched.push(Watched::new(template.clone(), rendered, self.config));
                }
            }
            // Nomad runs them after the first render once the task runs, and after a restart
            // only when `render_templates` has the templates rendered again.
            let restart = self
                .rendered_before
                .swap(true, std::sync::atomic::Ordering::SeqCst);
            if !restart || renders_on_restart(request) {
                let scripts: Vec<ChangeScript> = templates
                    .iter()
                    .filter(|template| template.change_mode == "script")
                    .filter_map(ChangeScript::of)
                    .filter(|script| script.run_on_first_render)
                    .collect();
                *crate::mutex::lock(&self.first_render_scripts) = scripts;
            }
            if watched.is_empty() {
                self.replace_watcher(None);
            } else {
                let token = CancellationToken::new();
                self.replace_watcher(Some(token.clone()));
                // The views of an earlier run ended with its watcher.
                self.data.lock().watched.clear();
                let views = self.variables.clone().map(|source| ViewContext {
                    source,
                    data: self.data.clone(),
                    block_query_wait: self.config.block_query_wait,
                    lifecycle: self.lifecycle.clone(),
                    cancel: token.clone(),
                });
                if let Some(views) = &views {
                    start_views(views);
                }
                tokio::spawn(watch(
                    watched,
                    Watching {
                        task_dir: self.task_dir.clone(),
                        env: self.env.clone(),
                        events: self.events.clone(),
                        lifecycle: self.lifecycle.clone(),
                        variables: self.variables.clone(),
                        data: self.data.clone(),
                        views,
                        shim_binary: self.shim_binary.clone(),
                    },
                    token,
                ));
            }
            Ok(())
        })
    }
}

/// What the watch loop works with.
struct Watching {
    task_dir: TaskDir,
    env: Arc<Mutex<BTreeMap<String, String>>>,
    events: TaskEventEmitter,
    lifecycle: TaskLifecycleHandle,
    variables: Option<VariableSource>,
    data: SharedData,
    /// Where new dependencies' views start (`None` without a variable source).
    views: Option<ViewContext>,
    shim_binary: Option<std::path::PathBuf>,
}

/// Re-renders `watched` templates when their data changed (and every [`WATCH_INTERVAL`]
/// while one reads files or holds a change) until cancelled, applying each one's change
/// mode when its output changes (and has settled, under a `wait`).
async fn watch(mut watched: Vec<Watched>, watching: Watching, cancel: CancellationToken) {
    let Watching {
        task_dir,
        env,
        events,
        lifecycle,
        variables,
        data,
        views,
        shim_binary,
    } = watching;
    let mut retry_fetch = false;
    loop {
        let poll = retry_fetch
            || watched
                .iter()
                .any(|entry| entry.reads_files || entry.pending.is_some());
        tokio::select! {
            // Cancellation wins over a timer that is due at the same moment.
            biased;
            () = cancel.cancelled() => return,
            () = data.changed.notified() => {}
            () = tokio::time::sleep(WATCH_INTERVAL), if poll => {}
        }
        retry_fetch = false;
        let env = match env.lock() {
            Ok(env) => env.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let mut restart = false;
        let mut signals: Vec<String> = Vec::new();
        let mut scripts: Vec<ChangeScript> = Vec::new();
        let mut splay = Duration::ZERO;
        for entry in &mut watched {
            let template = &entry.template;
            let (result, mut used) = render_one(template, &task_dir, &env, data.snapshot());
            let wanted = take_wanted(&mut used);
            if !wanted.is_empty() {
                // New reads (a listing now names more services): fetched, watched from here
                // on, and rendered again at once.
                match fetch(variables.as_ref(), &data, &wanted).await {
                    Ok(()) => {
                        if let Some(views) = &views {
                            start_views(views);
                        }
                        data.changed.notify_one();
                    }
                    Err(message) => {
                        tracing::debug!(%message, "fetching template variables failed");
                        retry_fetch = true;
                    }
                }
                continue;
            }
            let rendered = match result {
                Ok(rendered) => {
                    entry.reads_files = rendered.reads_files;
                    rendered
                }
                Err(message) => {
                    // A file mid-write may not render; the last good output stays.
                    tracing::debug!(%message, "template re-render failed");
                    continue;
                }
            };
            let Some(output) = entry.settle(rendered.output, tokio::time::Instant::now()) else {
                continue;
            };
            let template = &entry.template;
            if let Err(message) = write_one(template, &task_dir, &output) {
                tracing::warn!(%message, "template write failed");
                continue;
            }
            entry.last = output;
            events.emit(
                events
                    .event("Template")
                    .with_message(&format!("Template {} re-rendered", template.dest_path)),
            );
            splay = splay.max(Duration::from_nanos(
                u64::try_from(template.splay.0).unwrap_or(0),
            ));
            match template.change_mode.as_str() {
                "restart" => restart = true,
                "signal" => signals.push(template.change_signal.clone()),
                "script" => scripts.extend(ChangeScript::of(template)),
                _ => {}
            }
        }
        if !restart && signals.is_empty() && scripts.is_empty() {
            continue;
        }
        if !splay.is_zero() {
            let nanos = u64::try_from(splay.as_nanos()).unwrap_or(u64::MAX);
            let delay = Duration::from_nanos(rand::random::<u64>() % nanos.max(1));
            tokio::select! {
                biased;
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
        }
        if restart {
            lifecycle.request_restart(
                "template",
                "template with change_mode restart re-rendered",
                false,
            );
        } else {
            signals.sort();
            signals.dedup();
            for signal in signals {
                lifecycle.request_signal("template", "template re-rendered", &signal);
            }
            // Together, as Nomad runs them; the loop goes on once all have finished.
            let mut runs = tokio::task::JoinSet::new();
            for script in scripts {
                let (shim_binary, events, lifecycle) =
                    (shim_binary.clone(), events.clone(), lifecycle.clone());
                runs.spawn(async move {
                    run_change_script(&script, shim_binary.as_deref(), &events, &lifecycle).await;
                });
            }
            tokio::select! {
                biased;
                () = cancel.cancelled() => return,
                _ = runs.join_all() => {}
            }
        }
    }
}

/// Whether the task's (or its group's) restart policy has templates rendered again on a
/// restart (`render_templates`).
fn renders_on_restart(request: &PrestartRequest) -> bool {
    let renders = |policy: Option<&drover_structs::RestartPolicy>| {
        policy.is_some_and(|policy| policy.render_templates)
    };
    renders(request.task.restart_policy.as_ref())
        || request.alloc.job.as_ref().is_some_and(|job| {
            job.task_groups
                .iter()
                .filter(|group| group.name == request.alloc.task_group)
                .any(|group| renders(group.restart_policy.as_ref()))
        })
}

impl PoststartHook for TemplateHook {
    /// Runs the `change_script`s with `run_on_first_render` of the last render, together, as
    /// Nomad's poststart does, with the same events as on a change.
    fn poststart<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        _request: &'a PoststartRequest,
        _response: &'a mut PoststartResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            let scripts = std::mem::take(&mut *crate::mutex::lock(&self.first_render_scripts));
            let mut runs = tokio::task::JoinSet::new();
            for script in scripts {
                let (shim_binary, events, lifecycle) = (
                    self.shim_binary.clone(),
                    self.events.clone(),
                    self.lifecycle.clone(),
                );
                runs.spawn(async move {
                    run_change_script(&script, shim_binary.as_deref(), &events, &lifecycle).await;
                });
            }
            runs.join_all().await;
            Ok(())
        })
    }
}

impl UpdateHook for TemplateHook {
    fn update<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        request: &'a UpdateRequest,
        _response: &'a mut UpdateResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            if let Ok(mut shared) = self.env.lock() {
                shared.clone_from(&request.task_env.env);
            }
            Ok(())
        })
    }
}

impl StopHook for TemplateHook {
    fn stop<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
        _request: &'a StopRequest,
        _response: &'a mut StopResponse,
    ) -> HookFuture<'a, HookResult> {
        Box::pin(async move {
            self.replace_watcher(None);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_variables_are_named_as_consul_template_names_them() {
        let absent = |paths: &[&str]| paths.iter().map(|path| (*path).to_owned()).collect();
        let env: BTreeMap<String, String> = [
            ("NOMAD_NAMESPACE".to_owned(), "prod".to_owned()),
            ("NOMAD_REGION".to_owned(), "eu".to_owned()),
        ]
        .into();
        assert_eq!(
            missing_message(&absent(&["nomad/jobs/web"]), &env),
            "Missing: nomad.var.block(nomad/jobs/web@prod.eu)"
        );
        assert_eq!(
            missing_message(&absent(&["d", "a", "c", "b", "e"]), &BTreeMap::new()),
            "Missing: nomad.var.block(a@default.global), nomad.var.block(b@default.global), \
             nomad.var.block(c@default.global), and 2 more"
        );
    }
    use crate::allocdir::AllocDir;
    use crate::clock::TokioFollowingClock;
    use crate::taskenv::TaskEnv;
    use drover_structs::{Allocation, DurationNs, Task, TaskEvent};

    #[derive(Debug, Default)]
    struct RecordedRequests(Mutex<Vec<String>>);

    impl super::super::TaskLifecycleRequests for RecordedRequests {
        fn request_restart(&self, _source: &str, reason: &str, failure: bool) {
            self.0
                .lock()
                .unwrap()
                .push(format!("restart {reason} {failure}"));
        }
        fn request_signal(&self, _source: &str, _reason: &str, signal: &str) {
            self.0.lock().unwrap().push(format!("signal {signal}"));
        }
        fn request_kill(&self, _source: &str, reason: &str, _fail: bool) {
            self.0.lock().unwrap().push(format!("kill {reason}"));
        }
        fn persist_hook_state(&self, hook: &str, _state: BTreeMap<String, String>) {
            self.0.lock().unwrap().push(format!("persist {hook}"));
        }
    }

    /// The client's settings with its default `wait` turned off (`wait { min = 0 max = 0 }`).
    const NO_CLIENT_WAIT: crate::config::TemplateConfig = crate::config::TemplateConfig {
        wait: None,
        wait_bounds: crate::config::TemplateWaitBounds {
            min: None,
            max: None,
        },
        block_query_wait: crate::config::DEFAULT_TEMPLATE_BLOCK_QUERY_WAIT,
    };

    struct Fixture {
        _root: tempfile::TempDir,
        task_dir: TaskDir,
        requests: Arc<RecordedRequests>,
        events: Arc<Mutex<Vec<TaskEvent>>>,
        hook: TemplateHook,
    }

    fn fixture(templates: Vec<Template>) -> Fixture {
        let root = tempfile::tempdir().unwrap();
        let alloc_dir = AllocDir::new(root.path(), "a1").unwrap();
        let task_dir = alloc_dir.task_dir("t").unwrap();
        std::fs::create_dir_all(&task_dir.local_dir).unwrap();
        std::fs::create_dir_all(&task_dir.secrets_dir).unwrap();
        let requests = Arc::new(RecordedRequests::default());
        let events: Arc<Mutex<Vec<TaskEvent>>> = Arc::default();
        let sink = events.clone();
        let emitter = TaskEventEmitter::new(
            Arc::new(move |event| sink.lock().unwrap().push(event)),
            Arc::new(TokioFollowingClock::starting_at(0)),
        );
        let hook = TemplateHook::new(templates, task_dir.clone(), emitter, requests.clone())
            .with_config(NO_CLIENT_WAIT);
        Fixture {
            _root: root,
            task_dir,
            requests,
            events,
            hook,
        }
    }

    fn template(data: &str, destination: &str) -> Template {
        Template {
            embedded_tmpl: data.to_string(),
            dest_path: destination.to_string(),
            change_mode: "restart".to_string(),
            perms: "0644".to_string(),
            ..Template::default()
        }
    }

    async fn prestart(fixture: &Fixture) -> Result<PrestartResponse, HookError> {
        let request = PrestartRequest {
            alloc: Arc::new(Allocation::default()),
            task: Arc::new(Task::default()),
            task_dir: fixture.task_dir.clone(),
            task_env: TaskEnv {
                env: BTreeMap::from([("NOMAD_TASK_NAME".to_string(), "t".to_string())]),
                ..TaskEnv::default()
            },
            previous_state: BTreeMap::new(),
        };
        let mut response = PrestartResponse::default();
        fixture
            .hook
            .as_prestart()
            .unwrap()
            .prestart(&CancellationToken::new(), &request, &mut response)
            .await
            .map(|()| response)
    }

    async fn stop(fixture: &Fixture) {
        let request = StopRequest {
            existing_state: BTreeMap::new(),
        };
        fixture
            .hook
            .as_stop()
            .unwrap()
            .stop(&CancellationToken::new(), &request, &mut StopResponse)
            .await
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn prestart_renders_files_and_env_variables() {
        let mut env_template = template("A={{ env \"NOMAD_TASK_NAME\" }}\nB=2\n", "secrets/x.env");
        env_template.envvars = true;
        let mut source_template = template("", "local/from-source.txt");
        source_template.source_path = "local/tmpl.in".to_string();
        let fixture = fixture(vec![env_template, source_template]);
        std::fs::write(
            fixture.task_dir.local_dir.join("tmpl.in"),
            "[[ 1 ]]{{ \"src\" }}",
        )
        .unwrap();
        let response = prestart(&fixture).await.unwrap();
        assert_eq!(response.env["A"], "t");
        assert_eq!(response.env["B"], "2");
        assert_eq!(
            std::fs::read_to_string(fixture.task_dir.local_dir.join("from-source.txt")).unwrap(),
            "[[ 1 ]]src"
        );
        stop(&fixture).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_render_error_fails_prestart_with_destination_and_position() {
        let failing = fixture(vec![template("x\n {{ nope }}", "local/out")]);
        let error = prestart(&failing).await.unwrap_err();
        assert_eq!(error.kind, HookErrorKind::Unrecoverable);
        assert!(
            error.message.contains("template local/out at 2:5"),
            "{error}"
        );
        let first_event = failing.events.lock().unwrap()[0].r#type.clone();
        assert_eq!(first_event, "Template");
        let escape = fixture(vec![template("x", "../../etc/out")]);
        assert!(prestart(&escape).await.is_err());
    }

    async fn change_and_watch(mode: &str, signal: &str) -> (Vec<String>, String) {
        let mut watched = template("v={{ file \"local/data\" }}", "local/out");
        watched.change_mode = mode.to_string();
        watched.change_signal = signal.to_string();
        watched.splay = DurationNs(0);
        let fixture = fixture(vec![
            watched,
            template("{{ env \"NOMAD_TASK_NAME\" }}", "local/static"),
        ]);
        std::fs::write(fixture.task_dir.local_dir.join("data"), "1").unwrap();
        prestart(&fixture).await.unwrap();
        tokio::time::sleep(WATCH_INTERVAL * 3).await;
        assert!(
            fixture.requests.0.lock().unwrap().is_empty(),
            "nothing changed yet"
        );
        std::fs::write(fixture.task_dir.local_dir.join("data"), "2").unwrap();
        tokio::time::sleep(WATCH_INTERVAL * 2).await;
        let requests = fixture.requests.0.lock().unwrap().clone();
        let out = std::fs::read_to_string(fixture.task_dir.local_dir.join("out")).unwrap();
        stop(&fixture).await;
        // Stopped: a later change is not acted upon.
        std::fs::write(fixture.task_dir.local_dir.join("data"), "3").unwrap();
        tokio::time::sleep(WATCH_INTERVAL * 3).await;
        assert_eq!(*fixture.requests.0.lock().unwrap(), requests);
        (requests, out)
    }

    #[tokio::test(start_paused = true)]
    async fn a_changed_file_re_renders_and_applies_the_change_mode() {
        let (requests, out) = change_and_watch("restart", "").await;
        assert_eq!(out, "v=2");
        assert_eq!(
            requests,
            vec!["restart template with change_mode restart re-rendered false"]
        );
        let (requests, out) = change_and_watch("signal", "SIGHUP").await;
        assert_eq!(out, "v=2");
        assert_eq!(requests, vec!["signal SIGHUP"]);
        let (requests, out) = change_and_watch("noop", "").await;
        assert_eq!(out, "v=2");
        assert!(requests.is_empty());
    }

    #[test]
    fn destinations_are_interpolated_and_made_task_dir_relative() {
        let root = tempfile::tempdir().unwrap();
        let task_dir = AllocDir::new(root.path(), "a1")
            .unwrap()
            .task_dir("t")
            .unwrap();
        let env = TaskEnv {
            env: BTreeMap::from([(
                "NOMAD_SECRETS_DIR".to_string(),
                task_dir.secrets_dir.display().to_string(),
            )]),
            ..TaskEnv::default()
        };
        let resolved = resolve_paths(
            &template("x", "${NOMAD_SECRETS_DIR}/app.env"),
            &env,
            &task_dir,
        );
        assert_eq!(resolved.dest_path, "secrets/app.env");
        let resolved = resolve_paths(&template("x", "/local/app.conf"), &env, &task_dir);
        assert_eq!(resolved.dest_path, "/local/app.conf");
    }

    fn read_out(fixture: &Fixture) -> String {
        std::fs::read_to_string(fixture.task_dir.local_dir.join("out")).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn wait_holds_a_change_until_it_settles_for_min_or_max_has_passed() {
        let mut waiting = template("v={{ file \"local/data\" }}", "local/out");
        waiting.wait = Some(serde_json::json!({"Min": 1_000_000_000u64, "Max": 3_000_000_000u64}));
        waiting.splay = DurationNs(0);
        let fixture = fixture(vec![waiting]);
        std::fs::write(fixture.task_dir.local_dir.join("data"), "1").unwrap();
        let started = tokio::time::Instant::now();
        prestart(&fixture).await.unwrap();
        assert_eq!(
            started.elapsed(),
            Duration::ZERO,
            "the first render is written at once, as consul-template starts quiescence after it"
        );
        assert_eq!(read_out(&fixture), "v=1");

        // A change is written once it has stayed the same for min.
        std::fs::write(fixture.task_dir.local_dir.join("data"), "2").unwrap();
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(read_out(&fixture), "v=1", "held while settling");
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_eq!(read_out(&fixture), "v=2");
        assert_eq!(fixture.requests.0.lock().unwrap().len(), 1);

        // Data that keeps changing is written once max has passed.
        let changing = tokio::time::Instant::now();
        let mut written_at = None;
        for value in 3..12 {
            std::fs::write(fixture.task_dir.local_dir.join("data"), value.to_string()).unwrap();
            tokio::time::sleep(Duration::from_millis(500)).await;
            if written_at.is_none() && read_out(&fixture) != "v=2" {
                written_at = Some(changing.elapsed());
            }
        }
        let written_at = written_at.expect("written while the data kept changing");
        assert!(
            written_at >= Duration::from_secs(3) && written_at < Duration::from_secs(4),
            "{written_at:?}"
        );
        stop(&fixture).await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_clients_default_wait_holds_changes_of_templates_without_their_own() {
        let mut plain = template("v={{ file \"local/data\" }}", "local/out");
        plain.splay = DurationNs(0);
        let mut fixture = fixture(vec![plain]);
        // Nomad's client defaults: wait { min = "5s" max = "4m" }.
        let defaults = crate::config::TemplateConfig::default();
        assert_eq!(
            defaults.wait,
            Some((Duration::from_secs(5), Duration::from_secs(240)))
        );
        fixture.hook = TemplateHook::new(
            fixture.hook.templates.clone(),
            fixture.task_dir.clone(),
            fixture.hook.events.clone(),
            fixture.requests.clone(),
        );
        std::fs::write(fixture.task_dir.local_dir.join("data"), "1").unwrap();
        let started = tokio::time::Instant::now();
        prestart(&fixture).await.unwrap();
        assert_eq!(
            started.elapsed(),
            Duration::ZERO,
            "the first render is not held"
        );
        assert_eq!(read_out(&fixture), "v=1");

        std::fs::write(fixture.task_dir.local_dir.join("data"), "2").unwrap();
        tokio::time::sleep(Duration::from_millis(4_500)).await;
        assert_eq!(read_out(&fixture), "v=1", "held for the default min of 5s");
        assert!(fixture.requests.0.lock().unwrap().is_empty());
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        assert_eq!(read_out(&fixture), "v=2");
        assert_eq!(
            *fixture.requests.0.lock().unwrap(),
            vec!["restart template with change_mode restart re-rendered false"]
        );

        // A template's own wait (here none at all: min and max zero) overrides the client's.
        let mut immediate = template("v={{ file \"local/data\" }}", "local/out");
        immediate.splay = DurationNs(0);
        immediate.wait = Some(serde_json::json!({"Min": 0, "Max": 0}));
        assert_eq!(wait_bounds(&immediate, defaults), None);
        stop(&fixture).await;
    }

    #[test]
    fn wait_bounds_default_max_to_four_times_min_within_the_clients_bounds() {
        let unbounded = NO_CLIENT_WAIT;
        let mut waiting = template("x", "local/out");
        assert_eq!(wait_bounds(&waiting, unbounded), None);
        assert_eq!(
            wait_bounds(&waiting, crate::config::TemplateConfig::default()),
            Some((Duration::from_secs(5), Duration::from_secs(240))),
            "a template without a wait takes the client's"
        );
        waiting.wait = Some(serde_json::json!({"Min": 2_000_000_000u64, "Max": null}));
        assert_eq!(
            wait_bounds(&waiting, unbounded),
            Some((Duration::from_secs(2), Duration::from_secs(8)))
        );
        // The client's wait_bounds raise min and lower max.
        let bounded = crate::config::TemplateConfig {
            wait_bounds: crate::config::TemplateWaitBounds {
                min: Some(Duration::from_secs(3)),
                max: Some(Duration::from_secs(5)),
            },
            ..unbounded
        };
        assert_eq!(
            wait_bounds(&waiting, bounded),
            Some((Duration::from_secs(3), Duration::from_secs(5)))
        );
        waiting.wait = Some(serde_json::json!({"Min": 0, "Max": 0}));
        assert_eq!(wait_bounds(&waiting, unbounded), None);
    }

    /// A service catalog answering blocking queries as the servers do, counting queries.
    #[derive(Debug)]
    struct Catalog {
        state: tokio::sync::watch::Sender<(u64, Vec<drover_structs::ServiceRegistration>)>,
        queries: std::sync::atomic::AtomicUsize,
    }

    impl IdentitySigner for Catalog {
        fn sign(
            &self,
            _: Vec<drover_structs::client_rpc::WorkloadIdentityRequest>,
        ) -> crate::identity::SignFuture<'_> {
            Box::pin(async { unreachable!("the test gives the token") })
        }
        fn read_variable<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: &'a str,
            _: Blocking,
        ) -> crate::identity::VariableFuture<'a> {
            Box::pin(async { unreachable!("no variables in this test") })
        }
        fn list_variables<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: &'a str,
            _: Blocking,
        ) -> crate::identity::VariableListFuture<'a> {
            Box::pin(async { unreachable!("no variables in this test") })
        }
        fn read_service<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: &'a str,
            _: Option<&'a str>,
            blocking: Blocking,
        ) -> crate::identity::ServiceFuture<'a> {
            self.queries
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut receiver = self.state.subscribe();
            Box::pin(async move {
                if blocking.min_index > 0 {
                    tokio::select! {
                        _ = receiver.wait_for(|(index, _)| *index > blocking.min_index) => {}
                        () = tokio::time::sleep(blocking.max_wait) => {}
                    }
                }
                let (index, services) = receiver.borrow().clone();
                Ok(Indexed {
                    value: services,
                    index,
                })
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_service_registered_after_the_first_render_is_rendered_through_a_blocking_query() {
        let (state, _) = tokio::sync::watch::channel((7u64, Vec::new()));
        let catalog = Arc::new(Catalog {
            state,
            queries: std::sync::atomic::AtomicUsize::new(0),
        });
        let mut watching = template(
            "{{ range nomadService \"web\" }}{{ .Address }}:{{ .Port }}\n{{ end }}",
            "local/out",
        );
        watching.change_mode = "noop".to_string();
        let mut fixture = fixture(vec![watching]);
        let tokens = TaskTokens::default();
        tokens.set(
            DEFAULT_IDENTITY,
            crate::taskrunner::hooks::identity::SignedToken {
                jwt: "jwt".to_string(),
                expiration: 0,
            },
        );
        fixture.hook = TemplateHook::new(
            fixture.hook.templates.clone(),
            fixture.task_dir.clone(),
            fixture.hook.events.clone(),
            fixture.requests.clone(),
        )
        .with_config(NO_CLIENT_WAIT)
        .with_variables(VariableSource {
            reader: catalog.clone(),
            tokens,
            namespace: "default".to_string(),
        });
        prestart(&fixture).await.unwrap();
        assert_eq!(read_out(&fixture), "", "no registrations yet");

        // A minute without changes: one blocking query waits, nothing polls.
        tokio::time::sleep(Duration::from_secs(60)).await;
        let queries = catalog.queries.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(queries, 2, "the first read, then one blocking query");

        // The service registers: the blocked query answers and the file follows at once.
        catalog.state.send_replace((
            9,
            vec![drover_structs::ServiceRegistration {
                id: "web-1".to_string(),
                service_name: "web".to_string(),
                address: "10.0.0.1".to_string(),
                port: 8080,
                ..Default::default()
            }],
        ));
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(read_out(&fixture), "10.0.0.1:8080\n");
        assert!(fixture.requests.0.lock().unwrap().is_empty(), "noop");
        // The block query wait (5m) passes: one more query per wait, no more.
        tokio::time::sleep(Duration::from_secs(5 * 60 + 30)).await;
        let queries = catalog.queries.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(queries, 4, "{queries} queries");
        stop(&fixture).await;
        // Stopped: the view ends with the watcher.
        tokio::time::sleep(Duration::from_secs(15 * 60)).await;
        assert_eq!(
            catalog.queries.load(std::sync::atomic::Ordering::SeqCst),
            queries
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_script_that_cannot_run_reports_and_kills_under_fail_on_error() {
        let mut scripted = template("v={{ file \"local/data\" }}", "local/out");
        scripted.change_mode = "script".to_string();
        scripted.change_script = Some(serde_json::json!({
            "Command": "/bin/true",
            "Args": ["a", "b"],
            "Timeout": 5_000_000_000u64,
            "FailOnError": true,
        }));
        let fixture = fixture(vec![scripted]);
        std::fs::write(fixture.task_dir.local_dir.join("data"), "1").unwrap();
        prestart(&fixture).await.unwrap();
        std::fs::write(fixture.task_dir.local_dir.join("data"), "2").unwrap();
        tokio::time::sleep(WATCH_INTERVAL * 3).await;
        stop(&fixture).await;
        let failed: Vec<String> = fixture
            .events
            .lock()
            .unwrap()
            .iter()
            .filter(|event| event.r#type == drover_structs::TASK_HOOK_FAILED)
            .map(|event| event.display_message.clone())
            .collect();
        assert_eq!(
            failed,
            vec![
                "Template failed to run script /bin/true with arguments [a b] on change: the task is not running. Exit code: 0"
            ]
        );
        assert_eq!(
            *fixture.requests.0.lock().unwrap(),
            vec!["kill Template script failed, task is being killed"]
        );
    }

    async fn poststart(fixture: &Fixture) {
        let request = PoststartRequest {
            task_env: TaskEnv::default(),
            pid: None,
            driver_network: None,
        };
        fixture
            .hook
            .as_poststart()
            .unwrap()
            .poststart(&CancellationToken::new(), &request, &mut PoststartResponse)
            .await
            .unwrap();
    }

    fn hook_failures(fixture: &Fixture) -> Vec<String> {
        fixture
            .events
            .lock()
            .unwrap()
            .iter()
            .filter(|event| event.r#type == drover_structs::TASK_HOOK_FAILED)
            .map(|event| event.display_message.clone())
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn run_on_first_render_runs_the_script_at_poststart_after_the_first_render_only() {
        let mut scripted = template("v=1", "local/out");
        scripted.change_mode = "script".to_string();
        scripted.change_script = Some(serde_json::json!({
            "Command": "/bin/true",
            "Args": [],
            "Timeout": 5_000_000_000u64,
            "FailOnError": false,
            "RunOnFirstRender": true,
        }));
        let fixture = fixture(vec![scripted]);
        prestart(&fixture).await.unwrap();
        assert!(
            hook_failures(&fixture).is_empty(),
            "not before the task runs"
        );
        poststart(&fixture).await;
        // The fixture's lifecycle has no running task to exec in: the run is reported as
        // Nomad reports a script that cannot run.
        assert_eq!(
            hook_failures(&fixture),
            vec![
                "Template failed to run script /bin/true with arguments [] on change: the task is not running. Exit code: 0"
            ]
        );
        // A restart without render_templates: the script is not run again.
        prestart(&fixture).await.unwrap();
        poststart(&fixture).await;
        assert_eq!(hook_failures(&fixture).len(), 1);
        stop(&fixture).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_once_template_is_not_re_rendered() {
        let mut once = template("v={{ file \"local/data\" }}", "local/out");
        once.once = true;
        let fixture = fixture(vec![once]);
        std::fs::write(fixture.task_dir.local_dir.join("data"), "1").unwrap();
        prestart(&fixture).await.unwrap();
        std::fs::write(fixture.task_dir.local_dir.join("data"), "2").unwrap();
        tokio::time::sleep(WATCH_INTERVAL * 4).await;
        let out = std::fs::read_to_string(fixture.task_dir.local_dir.join("out")).unwrap();
        assert_eq!(out, "v=1");
        assert!(fixture.requests.0.lock().unwrap().is_empty());
    }
}
