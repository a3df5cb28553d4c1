//! Privilege check: tracefs instances need root or `CAP_SYS_ADMIN` (capability bit 21 of the
//! `CapEff:` hex mask in `/proc/self/status`, e.g. `CapEff:\t000001ffffffffff`).

use crate::RecordError;

/// `CAP_SYS_ADMIN` capability number.
const CAP_SYS_ADMIN: u32 = 21;

/// True when the hex `CapEff` mask contains CAP_SYS_ADMIN.
pub fn cap_eff_has_sys_admin(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|mask| mask & (1u64 << CAP_SYS_ADMIN) != 0)
}

/// Ok when this process may create tracefs instances.
pub fn check() -> Result<(), RecordError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid == 0 {
        return Ok(());
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if cap_eff_has_sys_admin(&status) {
        return Ok(());
    }
    Err(RecordError::NotPrivileged(format!(
        "recording needs root or CAP_SYS_ADMIN (tracefs instances); running as uid {euid} \
         without it: run `sudo stallscope record …`"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_eff_parsing() {
        // Root's mask on this 6.18 VM, and an unprivileged one.
        assert!(cap_eff_has_sys_admin(
            "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n"
        ));
        assert!(!cap_eff_has_sys_admin("CapEff:\t0000000000000000\n"));
        assert!(cap_eff_has_sys_admin("CapEff:\t0000000000200000\n"));
        assert!(!cap_eff_has_sys_admin("no such line\n"));
    }
}
