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
//! renders again; a `nomadVar` of a variable that does not exist holds the start (checked
//! again every [`VARIABLE_REFRESH`]) as Nomad's template blocks on it, while a service with
//! no registrations renders as an empty list. While the task runs, everything a template read
//! is fetched again every [`VARIABLE_REFRESH`], and a change re-renders it like a changed file.
//!
//! A template's `wait { min max }` holds a changed output (and its change mode) until it has
//! stayed the same for `min`, or changes have been held for `max`, the first render included
//! (consul-template's quiescence). `change_mode = "script"` runs `change_script` inside the
//! task through the shim's exec path (the one `alloc exec` and script checks take), with
//! Nomad's events, killing the task when it fails under `fail_on_error`.
//!
//! Templates that read only `env` cannot change while the task runs and are not watched, nor
//! are `once` templates. The watch loop polls on tokio time (paused in tests) every
//! [`WATCH_INTERVAL`].
//!
//! **Not** here: the engine and functions (`crate::template`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drover_structs::Template;
use tokio_util::sync::CancellationToken;

use super::{
    HookError, HookErrorKind, HookFuture, HookResult, PrestartHook, PrestartRequest,
    PrestartResponse, StopHook, StopRequest, StopResponse, TaskEventEmitter, TaskHook,
    TaskLifecycleHandle, UpdateHook, UpdateRequest, UpdateResponse,
};
use crate::allocdir::TaskDir;
use crate::identity::IdentitySigner;
use crate::taskrunner::hooks::identity::{DEFAULT_IDENTITY, TaskTokens};
use crate::template::funcs::{ServiceQuery, VariableCache};
use crate::template::{self, RenderScope, TemplateText, beneath};

/// How often templates that read files are re-rendered while the task runs.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(250);

/// How often the variables templates read are fetched again.
pub const VARIABLE_REFRESH: Duration = Duration::from_secs(1);

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

/// What renders asked for that the cache does not hold yet.
#[derive(Debug, Default)]
struct Wanted {
    reads: Vec<String>,
    lists: Vec<String>,
    services: Vec<ServiceQuery>,
    service_lists: Vec<Option<String>>,
}

impl Wanted {
    /// Takes the wanted sets out of a render's `cache`.
    fn take(cache: &mut VariableCache) -> Wanted {
        Wanted {
            reads: std::mem::take(&mut cache.wanted_reads)
                .into_iter()
                .collect(),
            lists: std::mem::take(&mut cache.wanted_lists)
                .into_iter()
                .collect(),
            services: std::mem::take(&mut cache.wanted_services)
                .into_iter()
                .collect(),
            service_lists: std::mem::take(&mut cache.wanted_service_lists)
                .into_iter()
                .collect(),
        }
    }

    fn is_empty(&self) -> bool {
        self.reads.is_empty()
            && self.lists.is_empty()
            && self.services.is_empty()
            && self.service_lists.is_empty()
    }
}

/// A template's `wait { min max }`: how long a changed output must stay unchanged before it
/// is written (`min`), and the longest a change may be held back (`max`; consul-template's
/// default without one is four times `min`). `None` without a wait, or when both are zero.
pub fn wait_bounds(
    template: &Template,
    bounds: crate::config::TemplateWaitBounds,
) -> Option<(Duration, Duration)> {
    let wait = template.wait.as_ref()?;
    let nanos = |field: &str| {
        wait.get(field)
            .and_then(serde_json::Value::as_u64)
            .map(Duration::from_nanos)
    };
    let min = nanos("Min").unwrap_or_default();
    let max = nanos("Max").unwrap_or(min.saturating_mul(4));
    (!min.is_zero() || !max.is_zero()).then(|| bounds.clamp((min, max.max(min))))
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
}

impl Watched {
    fn new(template: Template, last: String, bounds: crate::config::TemplateWaitBounds) -> Self {
        Watched {
            wait: wait_bounds(&template, bounds),
            template,
            last,
            pending: None,
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
        let fail_on_error = script
            .get("FailOnError")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        Some(ChangeScript {
            command,
            args,
            timeout,
            fail_on_error,
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
    use crate::checks::probe::{ScriptError, ScriptRun, run_in_task};
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

type SharedCache = Arc<Mutex<VariableCache>>;

fn snapshot(cache: &SharedCache) -> VariableCache {
    let guard = match cache.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    VariableCache {
        reads: guard.reads.clone(),
        lists: guard.lists.clone(),
        services: guard.services.clone(),
        service_lists: guard.service_lists.clone(),
        ..VariableCache::default()
    }
}

/// Fetches what `wanted` names into `cache`.
async fn fetch(
    source: Option<&VariableSource>,
    cache: &SharedCache,
    wanted: Wanted,
) -> Result<(), String> {
    let source = source.ok_or("this client reads no Nomad Variables or services for templates")?;
    let token = source.tokens.get(DEFAULT_IDENTITY).ok_or(
        "the task has no workload identity to read Nomad Variables or services with \
         (nomadVar and nomadService need the template's text to name them)",
    )?;
    let mut fetched_reads = Vec::new();
    for path in wanted.reads {
        let variable = source
            .reader
            .read_variable(&token, &source.namespace, &path)
            .await
            .map_err(|error| format!("nomadVar {path:?}: {error}"))?;
        fetched_reads.push((path, variable));
    }
    let mut fetched_lists = Vec::new();
    for prefix in wanted.lists {
        let listed = source
            .reader
            .list_variables(&token, &source.namespace, &prefix)
            .await
            .map_err(|error| format!("nomadVarList {prefix:?}: {error}"))?;
        fetched_lists.push((prefix, listed));
    }
    let mut fetched_services = Vec::new();
    for query in wanted.services {
        let namespace = query.namespace.as_deref().unwrap_or(&source.namespace);
        let found = source
            .reader
            .read_service(&token, namespace, &query.name, query.choose.as_deref())
            .await
            .map_err(|error| format!("nomadService {:?}: {error}", query.name))?;
        fetched_services.push((query, found));
    }
    let mut fetched_service_lists = Vec::new();
    for namespace in wanted.service_lists {
        let listed = source
            .reader
            .list_services(&token, namespace.as_deref().unwrap_or(&source.namespace))
            .await
            .map_err(|error| format!("nomadServices: {error}"))?;
        fetched_service_lists.push((namespace, listed));
    }
    let mut guard = match cache.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    guard.reads.extend(fetched_reads);
    guard.lists.extend(fetched_lists);
    guard.services.extend(fetched_services);
    guard.service_lists.extend(fetched_service_lists);
    Ok(())
}

/// Fetches again every variable, listing and service query in `cache`.
async fn refresh(source: Option<&VariableSource>, cache: &SharedCache) -> Result<(), String> {
    let known = snapshot(cache);
    let wanted = Wanted {
        reads: known.reads.keys().cloned().collect(),
        lists: known.lists.keys().cloned().collect(),
        services: known.services.keys().cloned().collect(),
        service_lists: known.service_lists.keys().cloned().collect(),
    };
    if wanted.is_empty() {
        return Ok(());
    }
    fetch(source, cache, wanted).await
}

/// Renders `template`, fetching the variables it wants until it wants no more; a variable
/// that does not exist is waited for (until `cancel`).
async fn render_with_variables(
    template: &Template,
    task_dir: &TaskDir,
    env: &BTreeMap<String, String>,
    source: Option<&VariableSource>,
    cache: &SharedCache,
    cancel: &CancellationToken,
    events: &TaskEventEmitter,
) -> Result<Rendered, String> {
    let mut passes = 0;
    let mut reported_missing = false;
    loop {
        let (result, mut used) = render_one(template, task_dir, env, snapshot(cache));
        let wanted = Wanted::take(&mut used);
        if !wanted.is_empty() {
            passes += 1;
            if passes > MAX_VARIABLE_PASSES {
                return Err(format!(
                    "template {}: still wants new variables after {MAX_VARIABLE_PASSES} renders",
                    template.dest_path
                ));
            }
            fetch(source, cache, wanted).await?;
            continue;
        }
        match result {
            Ok(rendered) => return Ok(rendered),
            Err(message) if !used.absent.is_empty() => {
                let absent: Vec<String> = used.absent.into_iter().collect();
                if !reported_missing {
                    reported_missing = true;
                    events.emit(
                        events
                            .event("Template")
                            .with_message(&format!("Missing: nomadVar {}", absent.join(", "))),
                    );
                }
                tracing::debug!(%message, "template waits for variables");
                tokio::select! {
                    () = cancel.cancelled() => return Err(message),
                    () = tokio::time::sleep(VARIABLE_REFRESH) => {}
                }
                fetch(
                    source,
                    cache,
                    Wanted {
                        reads: absent,
                        ..Wanted::default()
                    },
                )
                .await?;
            }
            Err(message) => return Err(message),
        }
    }
}

/// What a render before the start reads.
struct RenderInputs<'a> {
    task_dir: &'a TaskDir,
    env: &'a BTreeMap<String, String>,
    source: Option<&'a VariableSource>,
    cache: &'a SharedCache,
    cancel: &'a CancellationToken,
    events: &'a TaskEventEmitter,
}

/// The first render of a template with a `wait`, as consul-template's quiescence holds it:
/// rendered again every [`WATCH_INTERVAL`] until the output has stayed the same for `min`,
/// or `max` has passed since the first render.
async fn settle_first_render(
    template: &Template,
    first: Rendered,
    (min, max): (Duration, Duration),
    inputs: RenderInputs<'_>,
) -> Result<Rendered, String> {
    let start = tokio::time::Instant::now();
    let mut changed = start;
    let mut rendered = first;
    loop {
        let due = (changed + min).min(start + max);
        let now = tokio::time::Instant::now();
        if now >= due {
            return Ok(rendered);
        }
        tokio::select! {
            biased;
            () = inputs.cancel.cancelled() => {
                return Err(format!("template {}: cancelled while waiting", template.dest_path));
            }
            () = tokio::time::sleep_until(due.min(now + WATCH_INTERVAL)) => {}
        }
        if rendered.reads_variables
            && let Err(message) = refresh(inputs.source, inputs.cache).await
        {
            tracing::debug!(%message, "fetching template data again failed");
        }
        let again = render_with_variables(
            template,
            inputs.task_dir,
            inputs.env,
            inputs.source,
            inputs.cache,
            inputs.cancel,
            inputs.events,
        )
        .await?;
        if again.output != rendered.output {
            changed = tokio::time::Instant::now();
        }
        rendered = again;
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
    cache: SharedCache,
    /// The shim a `change_script` runs through (`None`: found next to the agent).
    shim_binary: Option<std::path::PathBuf>,
    /// The client's `wait_bounds`.
    wait_bounds: crate::config::TemplateWaitBounds,
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
            cache: Arc::default(),
            shim_binary: None,
            wait_bounds: crate::config::TemplateWaitBounds::default(),
        }
    }

    /// The same hook, holding templates' `wait` within the client's `bounds`.
    pub fn with_wait_bounds(mut self, bounds: crate::config::TemplateWaitBounds) -> Self {
        self.wait_bounds = bounds;
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
            for template in &templates {
                let rendered = render_with_variables(
                    template,
                    &self.task_dir,
                    &env,
                    self.variables.as_ref(),
                    &self.cache,
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
                let rendered = match wait_bounds(template, self.wait_bounds) {
                    Some(bounds) => settle_first_render(
                        template,
                        rendered,
                        bounds,
                        RenderInputs {
                            task_dir: &self.task_dir,
                            env: &env,
                            source: self.variables.as_ref(),
                            cache: &self.cache,
                            cancel,
                            events: &self.events,
                        },
                    )
                    .await
                    .map_err(render_failed)?,
                    None => rendered,
                };
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
                    watched.push(Watched::new(
                        template.clone(),
                        rendered.output,
                        self.wait_bounds,
                    ));
                }
            }
            if watched.is_empty() {
                self.replace_watcher(None);
            } else {
                let token = CancellationToken::new();
                self.replace_watcher(Some(token.clone()));
                tokio::spawn(watch(
                    watched,
                    Watching {
                        task_dir: self.task_dir.clone(),
                        env: self.env.clone(),
                        events: self.events.clone(),
                        lifecycle: self.lifecycle.clone(),
                        variables: self.variables.clone(),
                        cache: self.cache.clone(),
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
    cache: SharedCache,
    shim_binary: Option<std::path::PathBuf>,
}

/// Re-renders `watched` templates every [`WATCH_INTERVAL`] until cancelled, applying each
/// one's change mode when its output changes (and has settled, under a `wait`).
async fn watch(mut watched: Vec<Watched>, watching: Watching, cancel: CancellationToken) {
    let Watching {
        task_dir,
        env,
        events,
        lifecycle,
        variables,
        cache,
        shim_binary,
    } = watching;
    let mut last_refresh = tokio::time::Instant::now();
    loop {
        tokio::select! {
            // Cancellation wins over a timer that is due at the same moment.
            biased;
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(WATCH_INTERVAL) => {}
        }
        let env = match env.lock() {
            Ok(env) => env.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        if variables.is_some() && last_refresh.elapsed() >= VARIABLE_REFRESH {
            last_refresh = tokio::time::Instant::now();
            if let Err(message) = refresh(variables.as_ref(), &cache).await {
                tracing::debug!(%message, "fetching template variables again failed");
            }
        }
        let mut restart = false;
        let mut signals: Vec<String> = Vec::new();
        let mut scripts: Vec<ChangeScript> = Vec::new();
        let mut splay = Duration::ZERO;
        for entry in &mut watched {
            let template = &entry.template;
            let (result, mut used) = render_one(template, &task_dir, &env, snapshot(&cache));
            let wanted = Wanted::take(&mut used);
            if !wanted.is_empty() {
                if let Err(message) = fetch(variables.as_ref(), &cache, wanted).await {
                    tracing::debug!(%message, "fetching template variables failed");
                }
                continue;
            }
            let rendered = match result {
                Ok(rendered) => rendered,
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
        let hook = TemplateHook::new(templates, task_dir.clone(), emitter, requests.clone());
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
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "the first render waits min"
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

    #[test]
    fn wait_bounds_default_max_to_four_times_min_within_the_clients_bounds() {
        let unbounded = crate::config::TemplateWaitBounds::default();
        let mut waiting = template("x", "local/out");
        assert_eq!(wait_bounds(&waiting, unbounded), None);
        waiting.wait = Some(serde_json::json!({"Min": 2_000_000_000u64, "Max": null}));
        assert_eq!(
            wait_bounds(&waiting, unbounded),
            Some((Duration::from_secs(2), Duration::from_secs(8)))
        );
        // The client's wait_bounds raise min and lower max.
        let bounds = crate::config::TemplateWaitBounds {
            min: Some(Duration::from_secs(3)),
            max: Some(Duration::from_secs(5)),
        };
        assert_eq!(
            wait_bounds(&waiting, bounds),
            Some((Duration::from_secs(3), Duration::from_secs(5)))
        );
        waiting.wait = Some(serde_json::json!({"Min": 0, "Max": 0}));
        assert_eq!(wait_bounds(&waiting, unbounded), None);
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
