//! The `drover` command line: Nomad's commands and flags (single-dash long flags included), each a
//! thin client of the HTTP API through [`drover_api::client::ApiClient`], except `agent`, which
//! runs the agent itself.
//!
//! [`run`] takes the arguments and the output streams and returns the exit code, so tests can
//! drive every command without spawning a process. Not here: any orchestration logic.
//!
//! # Layers
//!
//! Each module directly under `src/` uses only modules on the lines below its own (`error`
//! modules aside), as `crates/structs/tests/module_cycles.rs` checks; top first:
//!
//! - `commands`
//! - `format`
//! - `argv`, `columnize`
//!
//! # Design notes
//!
//! The `drover` binary: Nomad's commands, each a thin client of the HTTP API
//! (`commands::lookup` finds allocations by ID or prefix for all of them; `job_plan` prints
//! Nomad's coloured diff, shared with `job_history`; `format::format_data` is Nomad's `Format`
//! behind `-json` and `-t`; `monitor` follows an evaluation's `NextEval` chain; `job_restart`:
//! `job restart` in batches through the alloc restart and stop routes, Ctrl-C noted and acted
//! on between batches, and `job start`; `job_tag`: version tags), and `agent`, which
//! calls `drover_agent::run`. **Boundary**: glue only.

mod argv;
mod columnize;
mod commands;
mod format;

use std::ffi::OsString;
use std::io::Write;

use clap::{Args, Parser, Subcommand};
use drover_api::client::{ApiClient, ClientConfig};

pub use argv::rewrite_single_dash_flags;

/// Where a command writes: its standard output and standard error.
pub struct Io<'a> {
    pub out: &'a mut dyn Write,
    pub err: &'a mut dyn Write,
}

impl Io<'_> {
    /// Writes a line to standard output. A closed pipe is not worth failing over.
    pub fn say(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(self.out, "{}", text.as_ref());
    }

    /// Writes a line to standard error.
    pub fn error(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(self.err, "{}", text.as_ref());
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "drover",
    version,
    about = "A workload orchestrator that speaks Nomad's API",
    disable_help_subcommand = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `drover agent …` parsed alone. clap builds the whole command tree to parse (every command,
/// every flag: code from all over the binary), which the agent's start has no use for: its
/// pages would stay resident in the agent for its whole life.
#[derive(Debug, Parser)]
#[command(name = "drover", disable_help_subcommand = true)]
struct AgentCli {
    #[command(subcommand)]
    command: AgentOnly,
}

#[derive(Debug, Subcommand)]
enum AgentOnly {
    /// Run the agent (server and client)
    Agent(drover_agent::AgentArgs),
}

/// Flags every API command takes, as Nomad names them.
#[derive(Debug, Clone, Default, Args)]
pub struct ApiFlags {
    /// The agent's HTTP address (default: NOMAD_ADDR, else http://127.0.0.1:4646).
    #[arg(long, value_name = "ADDR")]
    pub address: Option<String>,
    /// The region to send the request to (default: NOMAD_REGION).
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    /// The namespace to act in (default: NOMAD_NAMESPACE, else default).
    #[arg(long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// The ACL token (default: NOMAD_TOKEN).
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
}

impl ApiFlags {
    pub fn client(&self) -> Result<ApiClient, drover_api::client::ClientError> {
        ApiClient::new(
            ClientConfig {
                address: self.address.clone(),
                token: self.token.clone(),
                namespace: self.namespace.clone(),
                region: self.region.clone(),
            }
            .with_environment(),
        )
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the agent (server and client)
    Agent(drover_agent::AgentArgs),
    /// Interact with ACL policies and tokens
    #[command(subcommand)]
    Acl(commands::acl::AclCommand),
    /// Interact with jobs
    #[command(subcommand)]
    Job(commands::job::JobCommand),
    /// Interact with allocations
    #[command(subcommand)]
    Alloc(commands::alloc::AllocCommand),
    /// Interact with namespaces
    #[command(subcommand)]
    Namespace(commands::namespace::NamespaceCommand),
    /// Interact with nodes
    #[command(subcommand)]
    Node(commands::node::NodeCommand),
    /// Interact with evaluations
    #[command(subcommand)]
    Eval(commands::eval::EvalCommand),
    /// Interact with deployments
    #[command(subcommand)]
    Deployment(commands::deployment::DeploymentCommand),
    /// Interact with scaling policies
    #[command(subcommand)]
    Scaling(commands::scaling::ScalingCommand),
    /// Interact with servers
    #[command(subcommand)]
    Server(commands::server::ServerCommand),
    /// Operate the servers: snapshots, peers
    #[command(subcommand)]
    Operator(commands::operator::OperatorCommand),
    /// Interact with registered services
    #[command(subcommand)]
    Service(commands::service::ServiceCommand),
    /// Stream an agent's log
    Monitor(commands::agent_monitor::MonitorArgs),
    /// Show the status of jobs, or of any object by ID prefix
    Status(commands::status::StatusArgs),
    /// Interact with the system API
    #[command(subcommand)]
    System(commands::system::SystemCommand),
    /// Interact with variables
    #[command(subcommand)]
    Var(commands::var::VarCommand),
    /// Log in through an auth method (single sign-on) and get an ACL token
    Login(commands::login::LoginArgs),
    /// Manage the service mesh's intentions
    #[command(subcommand)]
    Intention(commands::intention::IntentionCommand),
    /// Run a Connect sidecar proxy (started by the client for a `connect` service)
    #[command(hide = true)]
    ConnectProxy(commands::connect_proxy::ConnectProxyArgs),
    /// Print the version
    Version,
}

/// Runs one invocation (`arguments[0]` is the program name) and returns its exit code.
pub async fn run(arguments: Vec<OsString>, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let mut io = Io { out, err };
    let arguments = rewrite_single_dash_flags(arguments);
    let parsed = if arguments.get(1).is_some_and(|command| command == "agent") {
        AgentCli::try_parse_from(arguments).map(|cli| match cli.command {
            AgentOnly::Agent(arguments) => Cli {
                command: Command::Agent(arguments),
            },
        })
    } else {
        Cli::try_parse_from(arguments)
    };
    let cli = match parsed {
        Ok(cli) => cli,
        Err(error) => {
            let rendered = error.render().to_string();
            return match error.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    io.say(rendered.trim_end());
                    0
                }
                _ => {
                    io.error(rendered.trim_end());
                    1
                }
            };
        }
    };
    match cli.command {
        Command::Version => {
            io.say(format!("drover v{}", env!("CARGO_PKG_VERSION")));
            0
        }
        Command::Agent(arguments) => match drover_agent::run(arguments).await {
            Ok(()) => 0,
            Err(error) => {
                io.error(format!("Error running the agent: {error:#}"));
                1
            }
        },
        Command::Acl(command) => commands::acl::run(command, &mut io).await,
        Command::Job(command) => commands::job::run(command, &mut io).await,
        Command::Alloc(command) => commands::alloc::run(command, &mut io).await,
        Command::Namespace(command) => commands::namespace::run(command, &mut io).await,
        Command::Node(command) => commands::node::run(command, &mut io).await,
        Command::Eval(command) => commands::eval::run(command, &mut io).await,
        Command::Deployment(command) => commands::deployment::run(command, &mut io).await,
        Command::Scaling(command) => commands::scaling::run(command, &mut io).await,
        Command::Server(command) => commands::server::run(command, &mut io).await,
        Command::Operator(command) => commands::operator::run(command, &mut io).await,
        Command::Service(command) => commands::service::run(command, &mut io).await,
        Command::Status(arguments) => commands::status::run(arguments, &mut io).await,
        Command::Login(arguments) => commands::login::run(arguments, &mut io).await,
        Command::System(command) => commands::system::run(command, &mut io).await,
        Command::Var(command) => commands::var::run(command, &mut io).await,
        Command::Monitor(arguments) => commands::agent_monitor::run(arguments, &mut io).await,
        Command::Intention(command) => commands::intention::run(command, &mut io).await,
        Command::ConnectProxy(arguments) => commands::connect_proxy::run(arguments, &mut io).await,
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// The agent's own parser and the whole command tree must say and accept the same for
    /// `drover agent`: same help, same flags.
    #[test]
    fn the_agent_parser_alone_matches_the_agent_of_the_whole_tree() {
        let mut whole = Cli::command();
        let mut alone = AgentCli::command();
        let whole = whole.find_subcommand_mut("agent").expect("agent command");
        let alone = alone.find_subcommand_mut("agent").expect("agent command");
        assert_eq!(
            alone.render_long_help().to_string(),
            whole.render_long_help().to_string()
        );
    }

    #[tokio::test]
    async fn an_unknown_agent_flag_is_refused_as_before() {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let arguments = ["drover", "agent", "-no-such-flag"]
            .map(OsString::from)
            .to_vec();
        let code = run(arguments, &mut out, &mut err).await;
        let err = String::from_utf8(err).unwrap();
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("--no-such-flag"), "{err}");
        assert!(err.contains("Usage: drover agent"), "{err}");
    }
}
