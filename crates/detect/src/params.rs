//! Detector thresholds: declared statically ([`ParamInfo`]: name, default, unit, doc) and
//! overridden from the command line (`--set runqueue-starvation.threshold_ns=20ms`).
//!
//! Values are unsigned integers. Durations accept a unit suffix: `ns`, `us`, `ms`, `s`
//! (`20ms` = 20000000); a bare number is in the parameter's own unit.

/// What a parameter's number means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamUnit {
    /// Nanoseconds (suffixes `ns`, `us`, `ms`, `s` accepted).
    Ns,
    /// A plain count or factor.
    Count,
    /// Events per second.
    PerSecond,
    /// Parts per thousand.
    Permille,
}

impl ParamUnit {
    /// Short unit name for listings.
    pub fn name(self) -> &'static str {
        match self {
            ParamUnit::Ns => "ns",
            ParamUnit::Count => "count",
            ParamUnit::PerSecond => "per second",
            ParamUnit::Permille => "permille",
        }
    }
}

/// One threshold.
#[derive(Debug)]
pub struct ParamInfo {
    /// Name (`threshold_ns`).
    pub name: &'static str,
    /// Default value.
    pub default: u64,
    /// Unit.
    pub unit: ParamUnit,
    /// What it controls.
    pub doc: &'static str,
}

/// Resolved values of one detector's parameters.
#[derive(Clone, Debug, Default)]
pub struct Params {
    values: Vec<(&'static str, u64)>,
}

impl Params {
    /// Defaults of `infos`.
    pub fn defaults(infos: &'static [ParamInfo]) -> Params {
        Params {
            values: infos.iter().map(|p| (p.name, p.default)).collect(),
        }
    }

    /// The value of `name` (0 for a name the detector does not declare — a programming
    /// error caught by the registry test).
    pub fn get(&self, name: &str) -> u64 {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, v)| *v)
    }

    /// Sets `name` from text; `Err` explains a bad name or value.
    pub fn set(
        &mut self,
        infos: &'static [ParamInfo],
        name: &str,
        text: &str,
    ) -> Result<(), String> {
        let info = infos.iter().find(|p| p.name == name).ok_or_else(|| {
            let names: Vec<&str> = infos.iter().map(|p| p.name).collect();
            format!(
                "unknown parameter {name:?}; expected one of: {}",
                names.join(", ")
            )
        })?;
        let v = parse_value(info.unit, text)?;
        if let Some(slot) = self.values.iter_mut().find(|(n, _)| *n == name) {
            slot.1 = v;
        }
        Ok(())
    }
}

/// Parses a value of `unit`: a decimal integer, for [`ParamUnit::Ns`] optionally with a
/// `ns`/`us`/`ms`/`s` suffix and a decimal fraction (`1.5ms`).
pub fn parse_value(unit: ParamUnit, text: &str) -> Result<u64, String> {
    let t = text.trim();
    let bad = || format!("bad value {text:?} for a {} parameter", unit.name());
    if unit != ParamUnit::Ns {
        return t.parse::<u64>().map_err(|_| bad());
    }
    let (num, scale) = if let Some(n) = t.strip_suffix("ns") {
        (n, 1u64)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1_000)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1_000_000)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1_000_000_000)
    } else {
        (t, 1)
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(bad());
    }
    let mut v = int
        .parse::<u64>()
        .map_err(|_| bad())?
        .checked_mul(scale)
        .ok_or_else(bad)?;
    let mut place = scale;
    for d in frac.bytes() {
        place /= 10;
        if place == 0 {
            return Err(bad());
        }
        v = v.checked_add(u64::from(d - b'0') * place).ok_or_else(bad)?;
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_with_units() {
        assert_eq!(parse_value(ParamUnit::Ns, "20ms"), Ok(20_000_000));
        assert_eq!(parse_value(ParamUnit::Ns, "1.5ms"), Ok(1_500_000));
        assert_eq!(parse_value(ParamUnit::Ns, "250us"), Ok(250_000));
        assert_eq!(parse_value(ParamUnit::Ns, "2s"), Ok(2_000_000_000));
        assert_eq!(parse_value(ParamUnit::Ns, "42"), Ok(42));
        assert!(parse_value(ParamUnit::Ns, "1.5ns").is_err());
        assert!(parse_value(ParamUnit::Ns, "-1ms").is_err());
        assert!(parse_value(ParamUnit::Count, "3ms").is_err());
        assert_eq!(parse_value(ParamUnit::Count, "3"), Ok(3));
    }

    #[test]
    fn set_checks_names() {
        static P: [ParamInfo; 1] = [ParamInfo {
            name: "threshold_ns",
            default: 5,
            unit: ParamUnit::Ns,
            doc: "",
        }];
        let mut p = Params::defaults(&P);
        assert_eq!(p.get("threshold_ns"), 5);
        p.set(&P, "threshold_ns", "1us").unwrap();
        assert_eq!(p.get("threshold_ns"), 1000);
        assert!(p.set(&P, "nope", "1").unwrap_err().contains("threshold_ns"));
    }
}
