//! CPU-profile inputs, each normalized into a [`stallscope_model::Profile`]: one module per
//! format, plus the kernel symbol table used to name kernel frames.
//!
//! - [`kallsyms`]: `/proc/kallsyms` text, address → `symbol+offset`.

pub mod kallsyms;

pub use kallsyms::{Kallsyms, KernelSymbol, SymbolAt};
