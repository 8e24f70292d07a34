//! A minimal zip writer for `.pt2` archives, laid out as torch's `PyTorchStreamWriter` writes
//! them: entries under one root folder, their data 64-byte aligned (padding in a local extra
//! field with id `FB`), CRC-32 checked, zip64 records when an entry or an offset passes 4 GiB. Bytes go through the core
//! [`WeightSink`] (direct I/O, a writer thread), which computes each entry's CRC-32 as it streams.
//! Payload entries are STORED (uncompressed, so torch maps tensors straight from the file) and
//! streamed: the local header is written first and its CRC patched once the data is in. JSON
//! entries may be DEFLATE-compressed ([`ZipWriter::add_deflated`]; `PyTorchStreamWriter` can
//! compress a record too, and its reader inflates them): a program's JSON shrinks ~20x.

use hfexport_core::sink::WeightSink;
use std::io::Write;
use std::path::Path;

/// Alignment of every entry's data (what torch uses).
pub const ALIGN: u64 = 64;
const U32_MAX: u64 = 0xFFFF_FFFF;
/// Zip compression methods.
pub const STORED: u16 = 0;
pub const DEFLATE: u16 = 8;

/// Where an entry's bytes go: called any number of times with consecutive pieces.
pub type Sink<'a> = &'a mut dyn FnMut(&[u8]) -> std::io::Result<()>;

struct Entry {
    name: String,
    method: u16,
    crc: u32,
    /// Uncompressed and stored sizes.
    size: u64,
    csize: u64,
    offset: u64,
}

pub struct ZipWriter {
    /// The archive; its position is the next entry's offset.
    out: WeightSink,
    entries: Vec<Entry>,
    root: String,
    /// Writes zip64 records for every entry (tests use it to exercise the zip64 layout on
    /// small files).
    pub force_zip64: bool,
}

impl ZipWriter {
    pub fn create(path: &Path, root: &str) -> std::io::Result<ZipWriter> {
        let out = WeightSink::create(path)?;
        Ok(ZipWriter { out, entries: vec![], root: root.to_string(), force_zip64: false })
    }

    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.out.write_all(bytes)
    }

    /// Writes `<root>/<name>` from bytes.
    pub fn add(&mut self, name: &str, data: &[u8]) -> std::io::Result<()> {
        self.add_streamed(name, data.len() as u64, &mut |sink| sink(data))
    }

    /// Writes `<root>/<name>` DEFLATE-compressed.
    pub fn add_deflated(&mut self, name: &str, data: &[u8]) -> std::io::Result<()> {
        let packed = miniz_oxide::deflate::compress_to_vec(data, 6);
        let crc = crc32fast::hash(data);
        self.add_entry(name, DEFLATE, Some(crc), data.len() as u64, packed.len() as u64, &mut |sink| sink(&packed))
    }

    /// Writes `<root>/<name>` of exactly `size` bytes, produced by `fill` through the sink it
    /// is given (called any number of times).
    pub fn add_streamed(
        &mut self,
        name: &str,
        size: u64,
        fill: &mut dyn FnMut(Sink) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        self.add_entry(name, STORED, None, size, size, fill)
    }

    /// One entry: `csize` bytes from `fill` (the data as stored); `crc` of the uncompressed
    /// data if known, else computed over what `fill` writes (STORED).
    fn add_entry(
        &mut self,
        name: &str,
        method: u16,
        crc: Option<u32>,
        size: u64,
        csize: u64,
        fill: &mut dyn FnMut(Sink) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let full = format!("{}/{name}", self.root);
        let offset = self.out.position();
        let zip64 = self.force_zip64 || size.max(csize) >= U32_MAX;
        let zip64_extra = if zip64 { 4 + 16 } else { 0 };
        // local header: 30 bytes + name + extras; the FB extra pads the data to ALIGN
        let before_pad = offset + 30 + full.len() as u64 + zip64_extra + 4;
        let pad = (ALIGN - before_pad % ALIGN) % ALIGN;
        let mut h = Vec::with_capacity(64 + full.len() + pad as usize);
        h.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        h.extend_from_slice(&(if zip64 { 45u16 } else { 20u16 }).to_le_bytes()); // version needed
        h.extend_from_slice(&0x0800u16.to_le_bytes()); // flags: utf-8 names
        h.extend_from_slice(&method.to_le_bytes());
        h.extend_from_slice(&0u16.to_le_bytes()); // time
        h.extend_from_slice(&0x0021u16.to_le_bytes()); // date 1980-01-01
        let crc_at = offset + h.len() as u64;
        h.extend_from_slice(&0u32.to_le_bytes()); // crc, patched below
        let small = |v: u64| if zip64 { U32_MAX as u32 } else { v as u32 };
        h.extend_from_slice(&small(csize).to_le_bytes());
        h.extend_from_slice(&small(size).to_le_bytes());
        h.extend_from_slice(&(full.len() as u16).to_le_bytes());
        h.extend_from_slice(&((zip64_extra + 4 + pad) as u16).to_le_bytes());
        h.extend_from_slice(full.as_bytes());
        if zip64 {
            h.extend_from_slice(&1u16.to_le_bytes());
            h.extend_from_slice(&16u16.to_le_bytes());
            h.extend_from_slice(&size.to_le_bytes());
            h.extend_from_slice(&csize.to_le_bytes());
        }
        h.extend_from_slice(b"FB");
        h.extend_from_slice(&(pad as u16).to_le_bytes());
        h.extend(std::iter::repeat_n(b'Z', pad as usize));
        self.put(&h)?;
        let start = self.out.position();
        debug_assert_eq!(start % ALIGN, 0);
        // the CRC of a STORED entry is computed as its bytes stream through
        self.out.start_crc();
        {
            let out = &mut self.out;
            fill(&mut |b: &[u8]| out.write_all(b))?;
        }
        let streamed_crc = self.out.take_crc();
        let written = self.out.position() - start;
        if written != csize {
            return Err(std::io::Error::other(format!("{full}: {written} bytes written, {csize} announced")));
        }
        let crc = crc.unwrap_or(streamed_crc);
        self.out.patch(crc_at, &crc.to_le_bytes())?;
        self.entries.push(Entry { name: full, method, crc, size, csize, offset });
        Ok(())
    }

    /// Writes the central directory and the end records.
    pub fn finish(mut self) -> std::io::Result<()> {
        let cd_start = self.out.position();
        let entries = std::mem::take(&mut self.entries);
        for e in &entries {
            let zip64 = self.force_zip64 || e.size.max(e.csize) >= U32_MAX || e.offset >= U32_MAX;
            let mut c = Vec::with_capacity(46 + e.name.len() + 28);
            c.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
            c.extend_from_slice(&(if zip64 { 45u16 } else { 20u16 }).to_le_bytes()); // made by
            c.extend_from_slice(&(if zip64 { 45u16 } else { 20u16 }).to_le_bytes()); // needed
            c.extend_from_slice(&0x0800u16.to_le_bytes());
            c.extend_from_slice(&e.method.to_le_bytes());
            c.extend_from_slice(&0u16.to_le_bytes());
            c.extend_from_slice(&0x0021u16.to_le_bytes());
            c.extend_from_slice(&e.crc.to_le_bytes());
            let small = |v: u64| if zip64 { U32_MAX as u32 } else { v as u32 };
            c.extend_from_slice(&small(e.csize).to_le_bytes());
            c.extend_from_slice(&small(e.size).to_le_bytes());
            c.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
            c.extend_from_slice(&(if zip64 { 28u16 } else { 0 }).to_le_bytes());
            c.extend_from_slice(&0u16.to_le_bytes()); // comment
            c.extend_from_slice(&0u16.to_le_bytes()); // disk
            c.extend_from_slice(&0u16.to_le_bytes()); // internal attrs
            c.extend_from_slice(&0u32.to_le_bytes()); // external attrs
            c.extend_from_slice(&small(e.offset).to_le_bytes());
            c.extend_from_slice(e.name.as_bytes());
            if zip64 {
                c.extend_from_slice(&1u16.to_le_bytes());
                c.extend_from_slice(&24u16.to_le_bytes());
                c.extend_from_slice(&e.size.to_le_bytes());
                c.extend_from_slice(&e.csize.to_le_bytes());
                c.extend_from_slice(&e.offset.to_le_bytes());
            }
            self.put(&c)?;
        }
        let cd_size = self.out.position() - cd_start;
        let n = entries.len() as u64;
        let zip64 = self.force_zip64 || cd_start >= U32_MAX || n >= 0xFFFF;
        if zip64 {
            let eocd64 = self.out.position();
            let mut r = Vec::with_capacity(56 + 20);
            r.extend_from_slice(&0x0606_4b50u32.to_le_bytes());
            r.extend_from_slice(&44u64.to_le_bytes());
            r.extend_from_slice(&45u16.to_le_bytes());
            r.extend_from_slice(&45u16.to_le_bytes());
            r.extend_from_slice(&0u32.to_le_bytes());
            r.extend_from_slice(&0u32.to_le_bytes());
            r.extend_from_slice(&n.to_le_bytes());
            r.extend_from_slice(&n.to_le_bytes());
            r.extend_from_slice(&cd_size.to_le_bytes());
            r.extend_from_slice(&cd_start.to_le_bytes());
            r.extend_from_slice(&0x0706_4b50u32.to_le_bytes());
            r.extend_from_slice(&0u32.to_le_bytes());
            r.extend_from_slice(&eocd64.to_le_bytes());
            r.extend_from_slice(&1u32.to_le_bytes());
            self.put(&r)?;
        }
        let mut r = Vec::with_capacity(22);
        r.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&0u16.to_le_bytes());
        let n16 = if zip64 { 0xFFFF } else { n as u16 };
        r.extend_from_slice(&n16.to_le_bytes());
        r.extend_from_slice(&n16.to_le_bytes());
        r.extend_from_slice(&(if zip64 { U32_MAX as u32 } else { cd_size as u32 }).to_le_bytes());
        r.extend_from_slice(&(if zip64 { U32_MAX as u32 } else { cd_start as u32 }).to_le_bytes());
        r.extend_from_slice(&0u16.to_le_bytes());
        self.put(&r)?;
        self.out.finish().map(|_| ())
    }
}
