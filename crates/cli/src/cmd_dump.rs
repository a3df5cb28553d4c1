//! `stallscope dump`: normalized events, one per line, in the stable format documented in
//! `stallscope::model::event` (`TS_NS CPU PID NAME key=value…`); `--format json` writes
//! JSON lines `{"ts_ns","cpu","pid","event","fields":{…},"source":{"input","line"|"offset"}}`.
//! Used for cross-format tests and bug reports.

use std::io::Write;

use clap::Args;
use serde_json::{Map, Value};
use stallscope::model::{DataQuality, Event, FieldRef, SpanPos};
use stallscope::read::profile::{
    kernel_symbols_with_embedded, Kallsyms, KernelSymbolSource, KERNEL_ADDR_MIN,
};

use crate::common::{write_quality_text, CliError, InputArgs, OutputFormat};

/// Arguments of `stallscope dump`.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  stallscope dump perf.data | head\n  stallscope dump --source trace.txt\n  \
stallscope dump --format json perf.data | jq .event | sort | uniq -c"
)]
pub struct DumpArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
    /// Append each event's source (`# input:line N` / `# input:offset 0x…`) in text output,
    /// and the stack recorded with it (perf `-g` callchains, `ftrace:kernel_stack` /
    /// `user_stack` after their event) as `\t=> symbol (address)` lines, kernel frames named
    /// from the input's own kallsyms or this host's when the kernel release is the same.
    #[arg(long)]
    source: bool,
    /// Print the data-quality block to stderr at the end (text output).
    #[arg(long)]
    quality: bool,
}

fn json_line(ev: &Event, path: &str) -> Value {
    let mut fields = Map::new();
    ev.kind.for_each_field(&mut |k, v| {
        let jv = match v {
            FieldRef::Int(i) => Value::from(i),
            FieldRef::UInt(u) => Value::from(u),
            FieldRef::Str(s) => Value::from(s),
            FieldRef::State(s) => Value::from(s.to_string()),
            FieldRef::Bytes(b) => {
                Value::from(b.iter().map(|x| format!("{x:02x}")).collect::<String>())
            }
        };
        fields.insert(k.to_string(), jv);
    });
    let mut src = Map::new();
    src.insert("input".into(), Value::from(path));
    match ev.span.pos() {
        SpanPos::Line(l) => src.insert("line".into(), Value::from(l)),
        SpanPos::Byte(b) => src.insert("offset".into(), Value::from(b)),
    };
    let mut m = Map::new();
    m.insert("ts_ns".into(), Value::from(ev.ts));
    m.insert("cpu".into(), Value::from(ev.cpu));
    m.insert("pid".into(), Value::from(ev.pid));
    m.insert("event".into(), Value::from(ev.kind.name()));
    m.insert("fields".into(), Value::Object(fields));
    m.insert("source".into(), Value::Object(src));
    if let Some(cc) = &ev.callchain {
        m.insert(
            "callchain".into(),
            Value::from(cc.iter().map(|ip| format!("{ip:#x}")).collect::<Vec<_>>()),
        );
    }
    Value::Object(m)
}

/// The frames of a callchain (perf's markers say kernel or user) as `\t=> name (addr)`
/// lines, like `trace-cmd report` prints a stack: kernel frames named from `symbols`,
/// the others (and unknown kernel addresses) as `[unknown]`.
fn write_stack(
    out: &mut dyn Write,
    chain: &[u64],
    symbols: Option<&Kallsyms>,
) -> std::io::Result<()> {
    const CONTEXT_MAX: u64 = -4095i64 as u64;
    const KERNEL: u64 = -128i64 as u64;
    // perf.data callchains mark their kernel part (PERF_CONTEXT_KERNEL); callchains read
    // from text carry no marks: there the address says (the kernel's half of the space)
    let marked = chain.iter().any(|&ip| ip >= CONTEXT_MAX);
    let mut kernel = false;
    for &ip in chain {
        if ip >= CONTEXT_MAX {
            kernel = ip == KERNEL;
            continue;
        }
        let name = if kernel || !marked && ip >= KERNEL_ADDR_MIN {
            symbols.and_then(|k| k.lookup(ip))
        } else {
            None
        };
        match name {
            Some(s) if s.offset > 0 => writeln!(out, "\t=> {}+{:#x} ({ip:x})", s.name, s.offset)?,
            Some(s) => writeln!(out, "\t=> {} ({ip:x})", s.name)?,
            None => writeln!(out, "\t=> [unknown] ({ip:x})")?,
        }
    }
    Ok(())
}

/// Runs the command.
pub fn run(args: &DumpArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let mut inputs = args.input.open()?;
    let paths: Vec<String> = inputs.metas().iter().map(|m| m.path.clone()).collect();
    let path_of = |i: u16| paths.get(usize::from(i)).map_or("?", |s| s.as_str());
    // kernel symbols per input, built at the first stack of that input (--source only), and
    // again when the input's own table grows (perf script text names its frames as it goes)
    type Table = (Option<std::sync::Arc<str>>, Option<Kallsyms>);
    let mut symbols: Vec<Option<Table>> = vec![None; paths.len()];
    let mut batch = Vec::new();
    while inputs.next_batch(&mut batch)? {
        for ev in &batch {
            match args.format {
                OutputFormat::Text => {
                    out.write_all(ev.dump_line().as_bytes())?;
                    if args.source {
                        write!(out, " # {}:{}", path_of(ev.span.input()), ev.span.pos())?;
                    }
                    out.write_all(b"\n")?;
                    if let (true, Some(chain)) = (args.source, &ev.callchain) {
                        let i = usize::from(ev.span.input());
                        if let Some(slot) = symbols.get_mut(i) {
                            let metas = inputs.metas();
                            let meta = &metas[i];
                            let stale =
                                slot.as_ref()
                                    .is_none_or(|(k, _)| match (k, &meta.kallsyms) {
                                        (Some(a), Some(b)) => !std::sync::Arc::ptr_eq(a, b),
                                        (a, b) => a.is_some() != b.is_some(),
                                    });
                            if stale {
                                let table = kernel_symbols_with_embedded(
                                    &KernelSymbolSource::Auto,
                                    meta.kernel_release.as_deref(),
                                    meta.embedded_kallsyms(),
                                    &mut DataQuality::default(),
                                )
                                .ok()
                                .flatten();
                                *slot = Some((meta.kallsyms.clone(), table));
                            }
                            let table = slot.as_ref().and_then(|(_, t)| t.as_ref());
                            write_stack(out, chain, table)?;
                        }
                    }
                }
                OutputFormat::Json => {
                    serde_json::to_writer(&mut *out, &json_line(ev, path_of(ev.span.input())))?;
                    out.write_all(b"\n")?;
                }
            }
        }
    }
    if args.quality {
        out.flush()?;
        write_quality_text(&mut std::io::stderr(), &inputs.quality())?;
    }
    if inputs.events_read() == 0 {
        return Err(CliError::Missing(format!(
            "{}: dump has nothing to print: the inputs hold no event stallscope could read (`stallscope info` says what they contain)",
            args.input.files.join(", ")
        )));
    }
    Ok(())
}
