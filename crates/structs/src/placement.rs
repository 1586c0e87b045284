//! The two placement rules every level of a job may carry, constraints and affinities, in
//! Nomad's wire shape. Their own module because both the job model and the integration blocks
//! (a device request has them too) hold them.
//!
//! Not here: how they are checked against nodes (the scheduler) or their shortcuts (the
//! jobspec).

use crate::lenient::wire_struct;

wire_struct! {
    /// A placement constraint: `LTarget <Operand> RTarget`, such as `${attr.kernel.name} = linux`.
    pub struct Constraint {
        pub l_target: String,
        pub r_target: String,
        pub operand: String,
    }
}

wire_struct! {
    /// A placement preference with a weight from -100 to 100.
    pub struct Affinity {
        pub l_target: String,
        pub r_target: String,
        pub operand: String,
        pub weight: i64,
    }
}
