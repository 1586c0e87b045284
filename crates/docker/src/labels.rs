//! The labels drover puts on every container it starts. A leaf module: the task that sets them
//! and the garbage collector that reads them share it without importing each other.

/// Label naming the allocation a container belongs to (Nomad's).
pub const ALLOC_ID_LABEL: &str = "com.hashicorp.nomad.alloc_id";
/// Label naming the node whose client started a container (drover's own: an engine shared by
/// several clients must not have one remove another's containers as orphans).
pub const NODE_ID_LABEL: &str = "drover.node_id";
/// Label naming the task a container runs.
pub const TASK_NAME_LABEL: &str = "com.hashicorp.nomad.task_name";
