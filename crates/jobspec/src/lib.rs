//! Jobspecs → [`drover_structs::Job`]: Nomad's HCL2 jobspec language and JSON jobs, with
//! defaults applied per job type and validation that reports every error at once, located as
//! `file:line:col`.
//!
//! **Boundary**: knows nothing about the server; input is text, output is a `Job` or diagnostics.
