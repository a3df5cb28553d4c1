//! The statistics against scipy, computed live: python3 + scipy are run at test time on the
//! same inputs, and every p-value, statistic and special-function value must agree to a
//! relative 1e-9 (1e-7 for the asymptotic tails). When python3 or scipy is missing the
//! test prints why and passes without checking (the unit tests beside the code still pin
//! scipy values printed when they were written).
//!
//! The inputs are deterministic pseudo-random samples (our SplitMix64), some with ties,
//! small ones for the exact Mann-Whitney distribution and large ones for the asymptotic one.

use std::io::Write;
use std::process::{Command, Stdio};

use stallscope_compare::stats::{
    self, mann_whitney, rng::SplitMix64, special, welch, MwMethod, Summary,
};

/// Runs `script` with python3; `None` (and a printed reason) when python3/scipy is missing.
fn python(script: &str) -> Option<String> {
    let child = Command::new("python3")
        .arg("-c")
        .arg("import sys, json, scipy; exec(sys.stdin.read())")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            stallscope_testkit::require(
                &format!("python3 ({e})"),
                false,
                "apt-get install python3-scipy",
            );
            return None;
        }
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write script");
    let out = child.wait_with_output().expect("python3 output");
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("No module named 'scipy'") {
            stallscope_testkit::require("scipy", false, "apt-get install python3-scipy");
            return None;
        }
        panic!("python3 failed: {err}");
    }
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn close(ours: f64, theirs: f64, rel: f64, what: &str) {
    let tol = rel * theirs.abs().max(1e-300);
    assert!(
        (ours - theirs).abs() <= tol,
        "{what}: ours {ours:e}, scipy {theirs:e}"
    );
}

fn sample(rng: &mut SplitMix64, n: usize, levels: usize, shift: f64) -> Vec<f64> {
    (0..n).map(|_| rng.below(levels) as f64 + shift).collect()
}

fn list(v: &[f64]) -> String {
    let items: Vec<String> = v.iter().map(|x| format!("{x:?}")).collect();
    format!("[{}]", items.join(","))
}

#[test]
fn mann_whitney_matches_scipy() {
    let mut rng = SplitMix64::new(7);
    // (n_base, n_new, value levels, shift): few levels = many ties
    let cases = [
        (5, 6, 1000, 0.0),
        (8, 8, 1_000_000, 3.0e5),
        (20, 20, 1_000_000, 1.0e5),
        (3, 30, 1_000_000, 0.0),
        (12, 15, 6, 1.0),
        (200, 180, 50, 2.0),
        (500, 450, 1_000_000, 2.0e4),
        (40, 60, 3, 0.0),
    ];
    let mut script = String::from("from scipy.stats import mannwhitneyu\nout=[]\n");
    let mut ours = Vec::new();
    for (nb, nn, levels, shift) in cases {
        let b = sample(&mut rng, nb, levels, 0.0);
        let n = sample(&mut rng, nn, levels, shift);
        let r = mann_whitney(&b, &n).expect("non-empty");
        let method = match r.method {
            MwMethod::Exact => "exact",
            MwMethod::Asymptotic => "asymptotic",
        };
        script.push_str(&format!(
            "r=mannwhitneyu({}, {}, method='{method}', use_continuity=True)\nout.append([float(r.statistic), float(r.pvalue)])\n",
            list(&b),
            list(&n)
        ));
        ours.push(r);
    }
    script.push_str("print(json.dumps(out))\n");
    let Some(text) = python(&script) else { return };
    let theirs: Vec<[f64; 2]> = serde_json::from_str(text.trim()).expect("json");
    assert!(ours.iter().any(|r| r.method == MwMethod::Exact));
    assert!(ours.iter().any(|r| r.method == MwMethod::Asymptotic));
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        close(o.u_base, t[0], 1e-12, &format!("case {i} U"));
        close(o.p, t[1], 1e-7, &format!("case {i} p ({:?})", o.method));
    }
}

#[test]
fn welch_and_special_functions_match_scipy() {
    let mut rng = SplitMix64::new(11);
    let mut script = String::from(
        "from scipy.stats import ttest_ind, norm, t\nfrom scipy.special import betainc, gammaln\nout=[]\n",
    );
    let mut ours: Vec<(String, f64)> = Vec::new();
    for (nb, nn, shift) in [(5, 5, 0.3), (3, 9, 0.0), (10, 4, 2.0), (30, 25, 0.05)] {
        let b: Vec<f64> = (0..nb).map(|_| rng.below(1000) as f64 / 100.0).collect();
        let n: Vec<f64> = (0..nn)
            .map(|_| rng.below(700) as f64 / 100.0 + shift)
            .collect();
        let w = welch(&Summary::of(&b), &Summary::of(&n)).expect("variance");
        // scipy's statistic is base − new; ours is new − base
        script.push_str(&format!(
            "r=ttest_ind({}, {}, equal_var=False)\nout.append(-float(r.statistic)); out.append(float(r.pvalue)); out.append(float(r.df))\n",
            list(&b),
            list(&n)
        ));
        ours.push((format!("welch t {nb}/{nn}"), w.t));
        ours.push((format!("welch p {nb}/{nn}"), w.p));
        ours.push((format!("welch df {nb}/{nn}"), w.df));
    }
    for (a, b, x) in [
        (0.5, 0.5, 0.2),
        (2.5, 0.5, 0.9),
        (30.0, 0.5, 0.97),
        (3.0, 7.0, 0.4),
    ] {
        script.push_str(&format!("out.append(float(betainc({a}, {b}, {x})))\n"));
        ours.push((
            format!("betainc({a},{b},{x})"),
            special::incomplete_beta(a, b, x),
        ));
    }
    for z in [0.1, 1.0, 2.5, 2.9999, 3.0, 4.5, 8.0] {
        script.push_str(&format!("out.append(float(norm.sf({z})))\n"));
        ours.push((format!("norm.sf({z})"), special::normal_sf(z)));
    }
    for (tv, df) in [(0.5, 3.0), (2.2, 4.7), (6.0, 2.1), (1.96, 1000.0)] {
        script.push_str(&format!("out.append(float(2 * t.sf({tv}, {df})))\n"));
        ours.push((
            format!("t 2-sided ({tv}, {df})"),
            special::t_two_sided(tv, df),
        ));
    }
    for x in [0.5, 1.5, 7.3, 250.0] {
        script.push_str(&format!("out.append(float(gammaln({x})))\n"));
        ours.push((format!("gammaln({x})"), special::ln_gamma(x)));
    }
    script.push_str("print(json.dumps(out))\n");
    let Some(text) = python(&script) else { return };
    let theirs: Vec<f64> = serde_json::from_str(text.trim()).expect("json");
    assert_eq!(theirs.len(), ours.len());
    for ((what, o), t) in ours.iter().zip(&theirs) {
        close(*o, *t, 1e-9, what);
    }
}

#[test]
fn holm_matches_statsmodels_definition_in_python() {
    // statsmodels is not assumed; the same step-down rule written in numpy.
    let p = [0.01, 0.04, 0.03, 0.5, 0.001, 0.2];
    let ours = stats::holm(&p);
    let script = format!(
        "import numpy as np\np=np.array({})\no=np.argsort(p,kind='stable');m=len(p)\nadj=np.minimum(1,np.maximum.accumulate((m-np.arange(m))*p[o]))\nr=np.empty(m);r[o]=adj\nprint(json.dumps(r.tolist()))\n",
        list(&p)
    );
    let Some(text) = python(&script) else { return };
    let theirs: Vec<f64> = serde_json::from_str(text.trim()).expect("json");
    for (o, t) in ours.iter().zip(&theirs) {
        close(*o, *t, 1e-12, "holm");
    }
}
