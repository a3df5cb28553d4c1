//! `events/header_page`: the layout of a ring-buffer sub-buffer header.
//!
//! ```text
//!     field: u64 timestamp;    offset:0;    size:8;    signed:0;
//!     field: local_t commit;    offset:8;    size:8;    signed:1;
//!     field: int overwrite;    offset:8;    size:1;    signed:1;
//!     field: char data;    offset:16;    size:4080;    signed:0;
//! ```
//! `commit` is a kernel `long` (8 on 64-bit kernels, 4 on 32-bit); `data` offset + size is
//! the sub-buffer size (the page size historically, configurable on ≥ 6.8 kernels).

use super::format_file::parse_field_line;

/// Parsed `header_page`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderPage {
    /// Offset of the page timestamp.
    pub timestamp_offset: u32,
    /// Offset of the commit word.
    pub commit_offset: u32,
    /// Size of the commit word = the kernel's `sizeof(long)`.
    pub commit_size: u32,
    /// Offset of the event data in a sub-buffer.
    pub data_offset: u32,
    /// Bytes of event data a sub-buffer can hold.
    pub data_size: u32,
}

impl HeaderPage {
    /// Parses the text; `Err` names the missing field.
    pub fn parse(text: &str) -> Result<HeaderPage, String> {
        let mut ts = None;
        let mut commit = None;
        let mut data = None;
        for line in text
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("field"))
        {
            // `field: u64 timestamp;` has a space after the colon; parse_field_line trims it.
            let f = parse_field_line(line)?;
            match f.name.as_str() {
                "timestamp" => ts = Some(f),
                "commit" => commit = Some(f),
                "data" => data = Some(f),
                _ => {}
            }
        }
        let ts = ts.ok_or("no `timestamp` field in header_page")?;
        let commit = commit.ok_or("no `commit` field in header_page")?;
        let data = data.ok_or("no `data` field in header_page")?;
        Ok(HeaderPage {
            timestamp_offset: ts.offset,
            commit_offset: commit.offset,
            commit_size: commit.size,
            data_offset: data.offset,
            data_size: data.size,
        })
    }

    /// Sub-buffer size in bytes (`data` offset + size).
    pub fn subbuf_size(&self) -> u64 {
        u64::from(self.data_offset) + u64::from(self.data_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_real_6_18_header_page() {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/samples/formats/header_page"
        );
        let h = HeaderPage::parse(&std::fs::read_to_string(p).unwrap()).unwrap();
        assert_eq!(
            (h.commit_size, h.data_offset, h.subbuf_size()),
            (8, 16, 4096)
        );
        assert!(HeaderPage::parse("garbage").is_err());
    }
}
