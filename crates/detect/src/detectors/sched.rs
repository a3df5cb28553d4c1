//! Scheduler facts needed to explain findings: nice from a kernel priority, and the CFS /
//! EEVDF load weight of a nice level (the kernel's `sched_prio_to_weight` table: each nice
//! step is about 1.25× the CPU share).

/// Load weight of nice −20 … 19.
const WEIGHTS: [u64; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904,
    3906, 3121, 2501, 1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87,
    70, 56, 45, 36, 29, 23, 18, 15,
];

/// Nice of a fair-class kernel priority (100..=139); `None` for RT / deadline / unknown.
pub fn nice_of_prio(prio: i32) -> Option<i32> {
    (100..=139).contains(&prio).then_some(prio - 120)
}

/// Load weight of a nice value (−20..=19).
pub fn weight_of_nice(nice: i32) -> Option<u64> {
    usize::try_from(nice + 20)
        .ok()
        .and_then(|i| WEIGHTS.get(i).copied())
}

/// "prio 100 (nice -20, weight 88761)", "prio 98 (real-time)", or "prio unknown".
pub fn describe_prio(prio: i32) -> String {
    match nice_of_prio(prio) {
        Some(n) => format!(
            "prio {prio} (nice {n}, weight {})",
            weight_of_nice(n).unwrap_or(0)
        ),
        None if (0..100).contains(&prio) => format!("prio {prio} (real-time or deadline)"),
        None => "prio unknown".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_of_known_levels() {
        assert_eq!(nice_of_prio(120), Some(0));
        assert_eq!(nice_of_prio(100), Some(-20));
        assert_eq!(nice_of_prio(99), None);
        assert_eq!(weight_of_nice(0), Some(1024));
        assert_eq!(weight_of_nice(-20), Some(88761));
        assert_eq!(weight_of_nice(19), Some(15));
        assert_eq!(weight_of_nice(20), None);
    }
}

/// Whether the kernel CPU list `list` (`0-3,5`) contains `cpu`; `None` if unparsable.
pub fn cpu_list_contains(list: &str, cpu: u32) -> Option<bool> {
    stallscope_model::parse_cpu_list(list)
        .ok()
        .map(|cpus| cpus.binary_search(&cpu).is_ok())
}

#[cfg(test)]
mod list_tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list_contains("0-3,5", 5), Some(true));
        assert_eq!(cpu_list_contains("0-3,5", 4), Some(false));
        assert_eq!(cpu_list_contains("1", 1), Some(true));
        assert_eq!(cpu_list_contains("x", 1), None);
    }
}
