//! placeholder: text_common (being written)
/// Detects a text format from its first bytes.
pub fn sniff_text(_head: &[u8]) -> Option<stallscope_model::InputFormat> {
    None
}
