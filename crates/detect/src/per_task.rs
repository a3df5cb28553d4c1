//! [`PerTask`]: a detector's per-task records, looked up by tid through the timeline's
//! dense [`TaskTable`] (direct indexing for ordinary tids, a hash map for the rest), which is
//! several times cheaper than hashing on every event.

use stallscope_model::Tid;
use stallscope_timeline::TaskTable;

/// Per-task records of type `T`, created on first use.
pub struct PerTask<T> {
    table: TaskTable<T>,
}

impl<T: Default> Default for PerTask<T> {
    fn default() -> Self {
        PerTask {
            table: TaskTable::default(),
        }
    }
}

impl<T: Default> PerTask<T> {
    /// The record of `tid`, created when missing.
    #[inline]
    pub fn entry(&mut self, tid: Tid) -> &mut T {
        let (i, _) = self.table.slot(tid);
        &mut self.table.get_mut(i).data
    }
}

impl<T: Default> PerTask<T> {
    /// The index of `tid`'s record (created when missing), for [`PerTask::at`] /
    /// [`PerTask::at_mut`]: one lookup for several uses. Indices stay valid.
    #[inline]
    pub fn index(&mut self, tid: Tid) -> usize {
        self.table.slot(tid).0
    }
}

impl<T> PerTask<T> {
    /// The record at `i` (from [`PerTask::index`]).
    #[inline]
    pub fn at(&self, i: usize) -> &T {
        &self.table.get(i).data
    }

    /// The record at `i` (from [`PerTask::index`]), mutable.
    #[inline]
    pub fn at_mut(&mut self, i: usize) -> &mut T {
        &mut self.table.get_mut(i).data
    }

    /// The record of `tid`, if any.
    #[inline]
    pub fn get(&self, tid: Tid) -> Option<&T> {
        self.table.find(tid).map(|i| &self.table.get(i).data)
    }

    /// The record of `tid`, mutable, if any.
    #[inline]
    pub fn get_mut(&mut self, tid: Tid) -> Option<&mut T> {
        let i = self.table.find(tid)?;
        Some(&mut self.table.get_mut(i).data)
    }
}

/// A detector's per-CPU state, grown on first use of a CPU number.
pub fn per_cpu<T: Default>(cpus: &mut Vec<T>, cpu: stallscope_model::Cpu) -> &mut T {
    let c = cpu as usize;
    if c >= cpus.len() {
        cpus.resize_with(c + 1, T::default);
    }
    &mut cpus[c]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_created_once() {
        let mut p: PerTask<u32> = PerTask::default();
        assert!(p.get(5).is_none());
        *p.entry(5) += 2;
        *p.entry(5) += 3;
        *p.entry(-7) += 1;
        assert_eq!(p.get(5), Some(&5));
        assert_eq!(p.get_mut(-7).copied(), Some(1));
        let i = p.index(5);
        *p.at_mut(i) += 1;
        assert_eq!((p.at(i), p.get(5)), (&6, Some(&6)));
        let j = p.index(9);
        assert_ne!(i, j);
        assert_eq!((p.at(j), p.at(i)), (&0, &6));
    }
}
