//! The `drover` binary: thin glue over the library crates (see `lib.rs`).

use std::process::ExitCode;

fn main() -> ExitCode {
    // Two arenas: the agent's threads share them instead of each fragmenting its own.
    drover_isolate::malloc::limit_malloc_arenas(2);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("Error starting the runtime: {error}");
            return ExitCode::from(1);
        }
    };
    // Not locked for the whole run: the agent's threads print too.
    let mut out = std::io::stdout();
    let mut err = std::io::stderr();
    let code = runtime.block_on(drover::run(
        std::env::args_os().collect(),
        &mut out,
        &mut err,
    ));
    // A standard-input reader of `alloc exec` may still be blocked in read(2); do not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
