//! Puts possibly overlapping time intervals on as few non-overlapping lanes as possible
//! (greedy by start time: each interval takes the lowest lane free at its start).
//!
//! Viewers draw slices on one track only when they nest; findings can overlap without
//! nesting, so each exporter draws them one lane per track (Perfetto) or per tid (Chrome).
//!
//! ```text
//! [0,10) [5,8) [12,20)  ->  lanes 0 1 0
//! ```

use stallscope_model::Ts;

/// The lane (0-based) of each interval `(start, end)`, in input order. An interval may
/// start where another on its lane ends.
pub fn assign_lanes(intervals: impl Iterator<Item = (Ts, Ts)>) -> Vec<usize> {
    let items: Vec<(Ts, Ts)> = intervals.map(|(a, b)| (a, b.max(a))).collect();
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| (items[i].0, items[i].1));
    let mut lane_end: Vec<Ts> = Vec::new();
    let mut lanes = vec![0; items.len()];
    for i in order {
        let (start, end) = items[i];
        let lane = match lane_end.iter().position(|&e| e <= start) {
            Some(l) => l,
            None => {
                lane_end.push(0);
                lane_end.len() - 1
            }
        };
        lane_end[lane] = end;
        lanes[i] = lane;
    }
    lanes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_intervals_get_separate_lanes() {
        assert_eq!(
            assign_lanes([(0, 10), (5, 8), (12, 20), (10, 11)].into_iter()),
            vec![0, 1, 0, 0]
        );
        assert!(assign_lanes(std::iter::empty()).is_empty());
    }
}
