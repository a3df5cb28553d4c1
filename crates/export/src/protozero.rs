//! A tiny protobuf *writer* (protozero-style): appends fields to a byte buffer, no schema,
//! no allocation per field.
//!
//! Wire format (proto2/proto3 alike): every field is `tag = (field_number << 3) | wire_type`
//! as a varint, then the value. Wire types used here: 0 varint (`int32/int64/uint*/bool/enum`;
//! negative `int64` is its two's-complement `u64`, 10 bytes), 1 fixed64, 2 length-delimited
//! (`string`, `bytes`, nested messages: varint length then the bytes).
//!
//! ```text
//! field 1 = 150      -> 08 96 01
//! field 2 = "hi"     -> 12 02 68 69
//! field 3 = { 1: 1 } -> 1a 02 08 01   (nested message, length 2)
//! ```
//!
//! Nested messages are written in place: [`ProtoBuf::begin`] writes the tag and reserves 4
//! bytes for the length, [`ProtoBuf::end`] writes the minimal varint there and moves the
//! content back over the unused reserved bytes (a few bytes to move for the small messages
//! that dominate). A nested message is limited to 2^28 - 1 bytes; callers keep messages far
//! smaller (one trace packet at a time).

/// Wire type of a varint field.
const WIRE_VARINT: u32 = 0;
/// Wire type of a fixed 64-bit field.
const WIRE_FIXED64: u32 = 1;
/// Wire type of a length-delimited field.
const WIRE_LEN: u32 = 2;

/// Largest nested message [`ProtoBuf::end`] can patch into its 4-byte length.
pub const MAX_NESTED_LEN: usize = (1 << 28) - 1;

/// Appends a varint (7 bits per byte, low first, high bit = more).
pub fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// A message being written. Holds the bytes; reuse it with [`ProtoBuf::clear`].
#[derive(Default, Debug)]
pub struct ProtoBuf {
    buf: Vec<u8>,
}

/// Position of an open nested message, returned by [`ProtoBuf::begin`].
#[must_use = "pass it to ProtoBuf::end"]
#[derive(Debug)]
pub struct Nested(usize);

impl ProtoBuf {
    /// An empty message.
    pub fn new() -> ProtoBuf {
        ProtoBuf::default()
    }

    /// The encoded bytes so far.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Encoded length so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Forgets the content, keeps the allocation.
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    fn tag(&mut self, field: u32, wire: u32) {
        put_varint(&mut self.buf, u64::from((field << 3) | wire));
    }

    /// `uint32/uint64/enum` field.
    pub fn uint(&mut self, field: u32, v: u64) {
        self.tag(field, WIRE_VARINT);
        put_varint(&mut self.buf, v);
    }

    /// `int32/int64` field (negative values take 10 bytes, as protobuf specifies).
    pub fn int(&mut self, field: u32, v: i64) {
        self.uint(field, v as u64);
    }

    /// `bool` field.
    pub fn bool(&mut self, field: u32, v: bool) {
        self.uint(field, u64::from(v));
    }

    /// `fixed64` field.
    pub fn fixed64(&mut self, field: u32, v: u64) {
        self.tag(field, WIRE_FIXED64);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// `bytes` field, or a nested message already encoded elsewhere.
    pub fn bytes_field(&mut self, field: u32, v: &[u8]) {
        self.tag(field, WIRE_LEN);
        put_varint(&mut self.buf, v.len() as u64);
        self.buf.extend_from_slice(v);
    }

    /// `string` field.
    pub fn str(&mut self, field: u32, v: &str) {
        self.bytes_field(field, v.as_bytes());
    }

    /// Opens a nested message in field `field`; close it with [`ProtoBuf::end`].
    pub fn begin(&mut self, field: u32) -> Nested {
        self.tag(field, WIRE_LEN);
        let at = self.buf.len();
        self.buf.extend_from_slice(&[0x80, 0x80, 0x80, 0x00]);
        Nested(at)
    }

    /// Appends bytes that are already encoded fields of this message.
    pub fn raw(&mut self, encoded: &[u8]) {
        self.buf.extend_from_slice(encoded);
    }

    /// Closes a nested message: writes its length as a minimal varint into the reserved
    /// bytes and moves the content back. Content larger than [`MAX_NESTED_LEN`] cannot be
    /// expressed in the reservation; it is then written as a redundant 4-byte varint of
    /// the clamped length (corrupt), which the writers avoid by bounding what they put in
    /// one message.
    pub fn end(&mut self, nested: Nested) {
        let at = nested.0;
        let start = at + 4;
        let len = self.buf.len() - start;
        if len > MAX_NESTED_LEN {
            let len = MAX_NESTED_LEN as u32;
            self.buf[at] = 0x80 | (len & 0x7f) as u8;
            self.buf[at + 1] = 0x80 | ((len >> 7) & 0x7f) as u8;
            self.buf[at + 2] = 0x80 | ((len >> 14) & 0x7f) as u8;
            self.buf[at + 3] = ((len >> 21) & 0x7f) as u8;
            return;
        }
        let mut head = [0u8; 4];
        let mut n = 0;
        let mut v = len as u32;
        while v >= 0x80 {
            head[n] = (v as u8) | 0x80;
            v >>= 7;
            n += 1;
        }
        head[n] = v as u8;
        n += 1;
        self.buf[at..at + n].copy_from_slice(&head[..n]);
        if n < 4 {
            self.buf.copy_within(start.., at + n);
            self.buf.truncate(at + n + len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_the_protobuf_docs() {
        // "test1" of the protobuf encoding guide: field 1 = 150 -> 08 96 01
        let mut m = ProtoBuf::new();
        m.uint(1, 150);
        assert_eq!(m.bytes(), &[0x08, 0x96, 0x01]);
        m.clear();
        m.str(2, "testing");
        assert_eq!(m.bytes(), b"\x12\x07testing");
        m.clear();
        m.int(1, -1);
        assert_eq!(m.len(), 11);
        assert_eq!(m.bytes()[10], 0x01);
    }

    #[test]
    fn nested_messages_get_minimal_lengths() {
        // the guide's "test3": field 3 = { field 1 = 150 } -> 1a 03 08 96 01
        let mut m = ProtoBuf::new();
        let n = m.begin(3);
        m.uint(1, 150);
        m.end(n);
        assert_eq!(m.bytes(), &[0x1a, 0x03, 0x08, 0x96, 0x01]);
        // two levels and a 300-byte body (2-byte length)
        m.clear();
        let outer = m.begin(1);
        let inner = m.begin(2);
        m.raw(&[7u8; 300]);
        m.end(inner);
        m.end(outer);
        assert_eq!(&m.bytes()[..5], &[0x0a, 0xaf, 0x02, 0x12, 0xac]);
        assert_eq!(m.bytes()[5], 0x02);
        assert_eq!(m.len(), 3 + 3 + 300);
    }
}
