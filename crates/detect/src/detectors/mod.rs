//! One module per detector, plus small shared helpers ([`sched`]: nice and weights,
//! [`fmt`]: units in titles).

pub mod blocked_chain;
pub mod cpu_saturation;
pub mod dispatch_starvation;
pub mod fmt;
pub mod idle_while_runnable;
pub mod lock_spinning;
pub mod runqueue_starvation;
pub mod sched;
pub mod wakeup_ping_pong;
pub mod worker_flood;
