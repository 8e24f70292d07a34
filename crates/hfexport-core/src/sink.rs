//! The one streaming file writer every container's weights go through: the ONNX external data,
//! the OpenVINO `.bin`, the `.pte` (program, constant segment, delegate payloads) and the
//! `.pt2` zip.
//!
//! Why one writer: a 70B checkpoint is written as 140-280 GB of weights, and how those bytes
//! reach the disk decides an export's wall time and memory more than anything the formats do.
//! - **Direct I/O** (`O_DIRECT`) where the filesystem allows it, ordinary writes otherwise
//!   (tmpfs refuses `O_DIRECT`): the data bypasses the page cache, which on the VMs we measured
//!   cost more kernel time than the conversion itself and left gigabytes of dirty pages behind.
//! - **A writer thread**: the caller fills one aligned 8 MiB buffer while the thread writes the
//!   previous one (positioned writes, so the order on disk is the order of the calls). Converting
//!   weights and writing them overlap, and an export is bound by the disk, not by one core.
//! - **Alignment and padding** ([`WeightSink::align_to`], [`WeightSink::pad_to`]) and the
//!   position of every byte ([`WeightSink::position`]), which each container records in its
//!   index (64-bit throughout: offsets beyond 4 GiB are ordinary).
//! - **Zero blocks become holes**: a whole block of zeros (padding, a zero-initialised table) is
//!   skipped, not written, so the file is sparse there and reads as zeros; `finish` sets the
//!   length. A checkpoint's zero regions cost no disk in the export either.
//! - **A CRC-32 while streaming** ([`WeightSink::start_crc`]), for zip entries, so the data is
//!   read once; and [`WeightSink::patch`] to fill a header field once the data is known.
//!
//! Memory: two buffers of [`BUF_LEN`], whatever the size of the file.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

/// Block size of direct I/O: buffer addresses, file offsets and lengths are multiples of it.
pub const BLOCK: usize = 4096;
/// Bytes per write: 8 MiB.
pub const BUF_LEN: usize = 2048 * BLOCK;
/// `O_DIRECT` on Linux x86_64 / aarch64.
const O_DIRECT: i32 = if cfg!(target_arch = "aarch64") { 0o200000 } else { 0o40000 };

/// One aligned block (direct I/O needs aligned memory).
#[repr(C, align(4096))]
#[derive(Clone, Copy)]
struct Block([u8; BLOCK]);

/// A buffer of whole blocks, viewed as bytes.
struct Aligned(Vec<Block>);

impl Aligned {
    fn new(len: usize) -> Aligned {
        Aligned(vec![Block([0; BLOCK]); len.div_ceil(BLOCK)])
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `Block` is a plain byte array with no padding, so the blocks are one
        // contiguous, initialised byte buffer of `len * BLOCK` bytes.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast::<u8>(), self.0.len() * BLOCK) }
    }
}

/// A full buffer for the writer thread: its first `len` bytes go to `offset`.
struct Job {
    buf: Aligned,
    len: usize,
    offset: u64,
}

/// The writer thread: jobs in, emptied buffers (or the first error) out.
struct Writer {
    jobs: SyncSender<Job>,
    done: Receiver<std::io::Result<Aligned>>,
    thread: JoinHandle<()>,
}

/// A file written front to back through aligned buffers, with direct I/O when possible.
pub struct WeightSink {
    path: PathBuf,
    file: File,
    direct: bool,
    /// The buffer being filled, `filled` bytes of it, for file offset `base`.
    buf: Aligned,
    filled: usize,
    base: u64,
    /// Buffers handed to the writer thread and not yet returned (0 or 1), and one it returned.
    in_flight: usize,
    spare: Option<Aligned>,
    writer: Option<Writer>,
    crc: Option<crc32fast::Hasher>,
}

impl WeightSink {
    /// Creates (truncates) `path`, with direct I/O where the filesystem accepts it.
    pub fn create(path: &Path) -> std::io::Result<WeightSink> {
        let open = |flags: i32| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .custom_flags(flags)
                .open(path)
        };
        let (file, direct) = match open(O_DIRECT) {
            Ok(f) => (f, true),
            Err(_) => (open(0)?, false),
        };
        Self::with_file(path, file, direct)
    }

    /// Like [`WeightSink::create`], never with direct I/O (the fallback, forced; tests use it to
    /// check both paths write the same bytes).
    pub fn create_buffered(path: &Path) -> std::io::Result<WeightSink> {
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
        Self::with_file(path, file, false)
    }

    fn with_file(path: &Path, file: File, direct: bool) -> std::io::Result<WeightSink> {
        let writer = spawn_writer(file.try_clone()?);
        Ok(WeightSink {
            path: path.to_path_buf(),
            file,
            direct,
            buf: Aligned::new(BUF_LEN),
            filled: 0,
            base: 0,
            in_flight: 0,
            spare: None,
            writer: Some(writer),
            crc: None,
        })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written so far: the offset of the next byte.
    pub fn position(&self) -> u64 {
        self.base + self.filled as u64
    }

    /// Writes zeros up to offset `to` (an error if the file is already past it).
    pub fn pad_to(&mut self, to: u64) -> std::io::Result<()> {
        let at = self.position();
        if to < at {
            return Err(std::io::Error::other(format!("{}: cannot pad back to {to} from {at}", self.path.display())));
        }
        self.write_zeros(to - at)
    }

    /// Writes zeros up to the next multiple of `align`; returns the (aligned) position.
    pub fn align_to(&mut self, align: u64) -> std::io::Result<u64> {
        let at = self.position();
        let to = at.div_ceil(align) * align;
        self.write_zeros(to - at)?;
        Ok(to)
    }

    fn write_zeros(&mut self, mut n: u64) -> std::io::Result<()> {
        const ZEROS: [u8; BLOCK] = [0; BLOCK];
        while n > 0 {
            let k = n.min(BLOCK as u64) as usize;
            self.write_all(&ZEROS[..k])?;
            n -= k as u64;
        }
        Ok(())
    }

    /// Starts a CRC-32 (IEEE, as zip uses) over every byte written from now on.
    pub fn start_crc(&mut self) {
        self.crc = Some(crc32fast::Hasher::new());
    }

    /// Ends the CRC started by [`WeightSink::start_crc`] and returns it.
    pub fn take_crc(&mut self) -> u32 {
        self.crc.take().map_or(0, |h| h.finalize())
    }

    /// Overwrites `bytes` at offset `at`, an already written part of the file (a header field
    /// known only after its data, like a zip entry's CRC).
    pub fn patch(&mut self, at: u64, bytes: &[u8]) -> std::io::Result<()> {
        let end = at + bytes.len() as u64;
        if end > self.position() {
            return Err(std::io::Error::other(format!(
                "{}: cannot patch {at}..{end}, only {} bytes are written",
                self.path.display(),
                self.position()
            )));
        }
        // the part still in the buffer
        if end > self.base {
            let from = at.max(self.base);
            let skip = (from - at) as usize;
            let offset = (from - self.base) as usize;
            self.buf.bytes()[offset..offset + bytes.len() - skip].copy_from_slice(&bytes[skip..]);
        }
        // the part already handed to the writer: wait until it is on disk, then rewrite it
        if at < self.base {
            let head = &bytes[..(self.base.min(end) - at) as usize];
            self.wait_in_flight()?;
            self.rewrite(at, head)?;
        }
        Ok(())
    }

    /// Rewrites written bytes in place: a read-modify-write of whole blocks with direct I/O.
    fn rewrite(&self, at: u64, bytes: &[u8]) -> std::io::Result<()> {
        if !self.direct {
            return self.file.write_all_at(bytes, at);
        }
        let start = at / BLOCK as u64 * BLOCK as u64;
        let end = (at + bytes.len() as u64).div_ceil(BLOCK as u64) * BLOCK as u64;
        let mut block = Aligned::new((end - start) as usize);
        let b = block.bytes();
        // the last block may be the file's end: what is missing reads as zeros
        let mut read = 0;
        while read < b.len() {
            match self.file.read_at(&mut b[read..], start + read as u64)? {
                0 => break,
                n => read += n,
            }
        }
        let offset = (at - start) as usize;
        b[offset..offset + bytes.len()].copy_from_slice(bytes);
        self.file.write_all_at(b, start)
    }

    /// Hands the full buffer to the writer thread and takes an empty one.
    fn submit(&mut self) -> std::io::Result<()> {
        let len = self.filled;
        if len == 0 {
            return Ok(());
        }
        // direct I/O writes whole blocks; a short tail is padded and trimmed in `finish`
        let padded = if self.direct { len.div_ceil(BLOCK) * BLOCK } else { len };
        self.buf.bytes()[len..padded].fill(0);
        // one buffer in flight already: wait for it, and fill it next
        if self.in_flight > 0 {
            self.receive()?;
        }
        let next = self.spare.take().unwrap_or_else(|| Aligned::new(BUF_LEN));
        let buf = std::mem::replace(&mut self.buf, next);
        let writer = self.writer.as_ref().expect("writer thread runs until finish");
        if writer.jobs.send(Job { buf, len: padded, offset: self.base }).is_err() {
            return Err(self.writer_error());
        }
        self.in_flight += 1;
        self.base += len as u64;
        self.filled = 0;
        Ok(())
    }

    /// Waits for a buffer back from the writer thread, kept as the spare.
    fn receive(&mut self) -> std::io::Result<()> {
        let writer = self.writer.as_ref().expect("writer thread runs until finish");
        let buf = writer.done.recv().map_err(|_| self.writer_error())??;
        self.in_flight -= 1;
        self.spare = Some(buf);
        Ok(())
    }

    fn writer_error(&self) -> std::io::Error {
        std::io::Error::other(format!("{}: the writer thread stopped", self.path.display()))
    }

    /// Waits until every buffer handed to the writer is on disk.
    fn wait_in_flight(&mut self) -> std::io::Result<()> {
        while self.in_flight > 0 {
            self.receive()?;
        }
        Ok(())
    }

    /// Writes what is buffered, trims the file to the bytes written, syncs it and returns its
    /// length.
    pub fn finish(mut self) -> std::io::Result<u64> {
        let len = self.position();
        self.submit()?;
        self.wait_in_flight()?;
        if let Some(w) = self.writer.take() {
            drop(w.jobs);
            let _ = w.thread.join();
        }
        // trims the last block (written whole with direct I/O) and extends over a final hole
        self.file.set_len(len)?;
        self.file.sync_all()?;
        Ok(len)
    }
}

impl Write for WeightSink {
    fn write(&mut self, mut data: &[u8]) -> std::io::Result<usize> {
        let total = data.len();
        if let Some(h) = &mut self.crc {
            h.update(data);
        }
        while !data.is_empty() {
            let filled = self.filled;
            let room = BUF_LEN - filled;
            let n = room.min(data.len());
            self.buf.bytes()[filled..filled + n].copy_from_slice(&data[..n]);
            self.filled += n;
            data = &data[n..];
            if self.filled == BUF_LEN {
                self.submit()?;
            }
        }
        Ok(total)
    }

    /// Nothing to do: bytes reach the file in [`WeightSink::finish`].
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for WeightSink {
    fn drop(&mut self) {
        if let Some(w) = self.writer.take() {
            drop(w.jobs);
            let _ = w.thread.join();
        }
    }
}

/// The writer thread: writes each job at its offset and sends the buffer back; after an error
/// it reports it and stops (the sender then sees the channel closed).
fn spawn_writer(file: File) -> Writer {
    let (jobs, incoming) = sync_channel::<Job>(2);
    let (report, done) = sync_channel::<std::io::Result<Aligned>>(2);
    let thread = std::thread::Builder::new()
        .name("hfexport-writer".into())
        .spawn(move || {
            for mut job in incoming {
                let r = write_sparse(&file, &job.buf.bytes()[..job.len], job.offset).map(|()| job.buf);
                let failed = r.is_err();
                if report.send(r).is_err() || failed {
                    return;
                }
            }
        })
        .expect("spawning the writer thread");
    Writer { jobs, done, thread }
}

/// Writes `bytes` at `offset` but for its whole blocks of zeros, which are left as holes (the
/// file is created truncated, so a hole reads as zeros). Offsets of jobs are block multiples.
fn write_sparse(file: &File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    let zero = |block: &[u8]| block.iter().fold(0u8, |acc, &b| acc | b) == 0;
    let mut run_start: Option<usize> = None;
    for (i, block) in bytes.chunks(BLOCK).enumerate() {
        let at = i * BLOCK;
        match (zero(block), run_start) {
            (true, Some(start)) => {
                file.write_all_at(&bytes[start..at], offset + start as u64)?;
                run_start = None;
            }
            (false, None) => run_start = Some(at),
            _ => {}
        }
    }
    match run_start {
        Some(start) => file.write_all_at(&bytes[start..], offset + start as u64),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes the same stream (odd pieces, padding, an alignment, patches in the buffer and on
    /// disk, a CRC) through `sink` and returns the file's bytes.
    fn exercise(mut sink: WeightSink) -> (Vec<u8>, u32) {
        let path = sink.path().to_path_buf();
        let data: Vec<u8> = (0..3 * BUF_LEN + 12345).map(|i| (i * 7 % 251) as u8).collect();
        sink.write_all(&data[..100]).unwrap();
        assert_eq!(sink.align_to(64).unwrap(), 128);
        sink.start_crc();
        for piece in data.chunks(777_777) {
            sink.write_all(piece).unwrap();
        }
        let crc = sink.take_crc();
        sink.pad_to(sink.position() + 5).unwrap();
        sink.patch(3, b"head").unwrap(); // on disk by now
        let tail = sink.position() - 10;
        sink.patch(tail, b"tail").unwrap(); // still buffered
        sink.patch(BUF_LEN as u64 - 2, b"span").unwrap(); // across a buffer boundary
        let len = sink.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, len);
        (bytes, crc)
    }

    #[test]
    fn direct_and_buffered_writes_give_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let (direct, crc) = exercise(WeightSink::create(&dir.path().join("a")).unwrap());
        let (buffered, crc2) = exercise(WeightSink::create_buffered(&dir.path().join("b")).unwrap());
        assert_eq!(direct, buffered);
        assert_eq!(crc, crc2);
        let data: Vec<u8> = (0..3 * BUF_LEN + 12345).map(|i| (i * 7 % 251) as u8).collect();
        assert_eq!(crc, crc32fast::hash(&data));
        let mut expected = data[..100].to_vec();
        expected.resize(128, 0);
        expected.extend_from_slice(&data);
        expected.extend_from_slice(&[0; 5]);
        expected[3..7].copy_from_slice(b"head");
        let tail = expected.len() - 10;
        expected[tail..tail + 4].copy_from_slice(b"tail");
        expected[BUF_LEN - 2..BUF_LEN + 2].copy_from_slice(b"span");
        assert_eq!(direct, expected);
    }

    #[test]
    fn zero_blocks_are_holes() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        for (name, mut sink) in [
            ("direct", WeightSink::create(&dir.path().join("a")).unwrap()),
            ("buffered", WeightSink::create_buffered(&dir.path().join("b")).unwrap()),
        ] {
            let path = sink.path().to_path_buf();
            sink.write_all(b"head").unwrap();
            sink.pad_to(4 * BUF_LEN as u64).unwrap();
            sink.write_all(b"middle").unwrap();
            sink.pad_to(8 * BUF_LEN as u64 + 3).unwrap();
            assert_eq!(sink.finish().unwrap(), 8 * BUF_LEN as u64 + 3);
            let bytes = std::fs::read(&path).unwrap();
            let mut expected = vec![0; 8 * BUF_LEN + 3];
            expected[..4].copy_from_slice(b"head");
            expected[4 * BUF_LEN..4 * BUF_LEN + 6].copy_from_slice(b"middle");
            assert!(bytes == expected, "{name}: the bytes differ");
            // two data blocks on disk (and maybe some metadata), not 64 MiB
            let on_disk = std::fs::metadata(&path).unwrap().blocks() * 512;
            assert!(on_disk <= 16 * BLOCK as u64, "{name}: {on_disk} bytes on disk for two blocks of data");
        }
    }

    #[test]
    fn the_crc_is_zips_crc32() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = WeightSink::create(&dir.path().join("a")).unwrap();
        sink.write_all(b"skipped").unwrap();
        sink.start_crc();
        sink.write_all(b"12345").unwrap();
        sink.write_all(b"6789").unwrap();
        assert_eq!(sink.take_crc(), 0xCBF4_3926);
    }

    #[test]
    fn patching_unwritten_bytes_or_padding_backwards_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = WeightSink::create(&dir.path().join("a")).unwrap();
        sink.write_all(&[1; 10]).unwrap();
        assert!(sink.patch(8, b"abc").unwrap_err().to_string().contains("only 10 bytes are written"));
        assert!(sink.pad_to(4).unwrap_err().to_string().contains("cannot pad back"));
    }
}
