//! [`BackgroundWriters`]: Parquet files encoded and compressed on a thread of their own, so
//! that the analysis that makes the batches (the reading and the model, on their own
//! threads) is not held up by the encoding: `stallscope tables` and each trace of `stallscope
//! fleet` write this way.
//!
//! Batches go to the writing thread through a bounded channel ([`QUEUED_BATCHES`] at most
//! wait, so memory stays bounded when the writing is the slower side). The first write error
//! stops the thread; the next [`BackgroundWriters::write`] and [`BackgroundWriters::finish`]
//! return it, naming the table.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

use arrow_array::RecordBatch;
use parquet::errors::ParquetError;

use crate::{ParquetWriter, Table};

/// Batches waiting for the writing thread at most.
pub const QUEUED_BATCHES: usize = 8;

/// A write error and the table it happened on (`None`: the thread itself failed).
pub type WriteError = (Option<Table>, ParquetError);

/// What the writing thread ends with: each table's rows written, or the error.
type Written = Result<Vec<(Table, u64)>, WriteError>;

/// Parquet writers owned by a writing thread (see the module documentation).
pub struct BackgroundWriters {
    sender: Option<SyncSender<(Table, RecordBatch)>>,
    thread: Option<JoinHandle<Written>>,
}

impl BackgroundWriters {
    /// Starts the writing thread with one writer per table.
    pub fn spawn(writers: Vec<(Table, ParquetWriter)>) -> std::io::Result<BackgroundWriters> {
        let (sender, receiver) = sync_channel::<(Table, RecordBatch)>(QUEUED_BATCHES);
        let thread = std::thread::Builder::new()
            .name("stallscope-parquet".into())
            .spawn(move || {
                let mut writers: Vec<(Table, ParquetWriter, u64)> =
                    writers.into_iter().map(|(t, w)| (t, w, 0)).collect();
                for (table, batch) in receiver {
                    // a batch of a table without a writer is not asked for: dropped
                    if let Some((_, w, rows)) = writers.iter_mut().find(|(t, _, _)| *t == table) {
                        w.write(&batch).map_err(|e| (Some(table), e))?;
                        *rows += batch.num_rows() as u64;
                    }
                }
                let mut written = Vec::with_capacity(writers.len());
                for (table, w, rows) in writers {
                    w.close().map_err(|e| (Some(table), e))?;
                    written.push((table, rows));
                }
                Ok(written)
            })?;
        Ok(BackgroundWriters {
            sender: Some(sender),
            thread: Some(thread),
        })
    }

    /// Hands `batch` of `table` to the writing thread (waits while [`QUEUED_BATCHES`] are
    /// queued). When the thread stopped on an error, returns that error.
    pub fn write(&mut self, table: Table, batch: RecordBatch) -> Result<(), WriteError> {
        let sent = match &self.sender {
            Some(s) => s.send((table, batch)).is_ok(),
            None => false,
        };
        if sent {
            return Ok(());
        }
        self.sender = None;
        match self.join() {
            Ok(_) => Err((
                None,
                ParquetError::General("the Parquet writing thread ended early".into()),
            )),
            Err(e) => Err(e),
        }
    }

    /// Writes what is queued, closes every file (their footers written) and returns each
    /// table's rows, in the order the writers were given.
    pub fn finish(mut self) -> Written {
        self.sender = None; // the thread's loop ends when the queue is empty
        self.join()
    }

    fn join(&mut self) -> Written {
        match self.thread.take() {
            Some(t) => t.join().unwrap_or_else(|_| {
                Err((
                    None,
                    ParquetError::General("the Parquet writing thread panicked".into()),
                ))
            }),
            None => Err((
                None,
                ParquetError::General("the Parquet writing thread already ended".into()),
            )),
        }
    }
}

impl Drop for BackgroundWriters {
    fn drop(&mut self) {
        // dropped without `finish` (an error elsewhere): let the thread end; its files are
        // left to their owner to remove
        self.sender = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{findings_batch, parquet_writer};

    #[test]
    fn batches_are_written_in_order_and_counted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("findings.parquet");
        let w = parquet_writer(&path, Table::Findings).expect("writer");
        let mut bg = BackgroundWriters::spawn(vec![(Table::Findings, w)]).expect("spawn");
        let empty = findings_batch(&[]).expect("batch");
        for _ in 0..20 {
            bg.write(Table::Findings, empty.clone()).expect("write");
        }
        // a table nobody asked for is dropped, not an error
        bg.write(Table::Waits, empty).expect("write");
        let written = bg.finish().expect("finish");
        assert_eq!(written, vec![(Table::Findings, 0)]);
        let file = std::fs::File::open(&path).expect("open");
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .expect("a complete Parquet file");
        assert_eq!(reader.metadata().file_metadata().num_rows(), 0);
    }

    #[test]
    fn a_write_error_is_returned_with_its_table() {
        // a device whose every write fails with ENOSPC (a full disk)
        let full = std::path::Path::new("/dev/full");
        if !full.exists() {
            eprintln!("!!! SKIPPED: no /dev/full on this system: the write-error test did not run");
            return;
        }
        let w = parquet_writer(full, Table::Waits).expect("writer");
        let mut bg = BackgroundWriters::spawn(vec![(Table::Waits, w)]).expect("spawn");
        let empty = RecordBatch::new_empty(Table::Waits.schema());
        let mut first_error = None;
        for _ in 0..(QUEUED_BATCHES + 4) {
            if let Err(e) = bg.write(Table::Waits, empty.clone()) {
                first_error = Some(e);
                break;
            }
        }
        // the error comes at the latest when the file's footer is written
        let (table, e) = match first_error {
            Some(e) => e,
            None => bg.finish().expect_err("a full disk fails the writing"),
        };
        assert_eq!(table, Some(Table::Waits));
        assert!(e.to_string().contains("No space left"), "{e}");
    }
}
