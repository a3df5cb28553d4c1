//! Issue #30 (installable like the tools it sits beside): the manual pages and the shell
//! completions are generated from the command line's definition — one page per subcommand
//! that `--help` lists, each with its own description and every flag its `--help` shows, and
//! completion scripts that name every subcommand and that the shell accepts.

use std::process::Command;

fn stallscope(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(args)
        .output()
        .expect("run stallscope");
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("utf-8")
}

/// `(name, description)` of every subcommand `stallscope --help` lists (but `help`).
fn subcommands() -> Vec<(String, String)> {
    let help = stallscope(&["--help"]);
    let v: Vec<(String, String)> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let (name, about) = l.trim().split_once(' ')?;
            Some((name.to_string(), about.trim().to_string()))
        })
        .filter(|(n, _)| n != "help")
        .collect();
    assert!(v.len() > 15, "{help}");
    v
}

#[test]
fn a_manual_page_per_subcommand_with_its_flags() {
    let dir = std::env::temp_dir().join(format!("stallscope-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let listed = stallscope(&["man", "--to", dir.to_str().unwrap()]);
    let mut want: Vec<String> = vec![dir.join("stallscope.1").display().to_string()];
    for (name, about) in subcommands() {
        let page = dir.join(format!("stallscope-{name}.1"));
        want.push(page.display().to_string());
        let text = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(text.contains(&format!(".TH stallscope-{name} 1")), "{name}");
        // the page's text with roff's escapes of '-' and '\'' undone
        let text = text.replace("\\-", "-").replace("\\*(Aq", "'");
        let first_words: String = about
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(text.contains(&first_words), "{name}: no '{first_words}'");
        // every long flag of the subcommand's --help is documented on its page
        for flag in stallscope(&[&name, "--help"])
            .split_whitespace()
            .filter(|w| w.starts_with("--") && w.len() > 2)
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '-'))
        {
            assert!(text.contains(flag), "{name}: {flag} missing from its page");
        }
    }
    let mut got: Vec<String> = listed.lines().map(str::to_string).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn completion_scripts_name_every_subcommand_and_parse() {
    let subs = subcommands();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stallscope(&["completions", shell]);
        for (name, _) in &subs {
            assert!(script.contains(name.as_str()), "{shell}: {name}");
        }
    }
    // bash accepts its script (syntax check, then loaded: the function is defined)
    let script = stallscope(&["completions", "bash"]);
    let o = Command::new("bash")
        .args(["-c", "eval \"$1\" && declare -F _stallscope", "-", &script])
        .output()
        .expect("bash");
    assert!(
        o.status.success() && String::from_utf8_lossy(&o.stdout).contains("_stallscope"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
