//! placeholder: tracefs_format (being written)
