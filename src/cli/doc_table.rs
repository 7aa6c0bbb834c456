//! `docs/cli.md` against the command line itself: every subcommand's flags, the old
//! spellings and the exit codes must be exactly what the document's tables say, so the
//! document cannot drift from `--help`.

use std::collections::{BTreeMap, BTreeSet};

use clap::CommandFactory;

use super::Cli;
use super::exit;
use super::vocabulary::{OLD_SPELLINGS, with_old_spellings};

const DOC: &str = include_str!("../../docs/cli.md");

/// The rows of the first Markdown table after the heading `## {section}`, as cells
/// (header and separator left out).
fn table(section: &str) -> Vec<Vec<String>> {
    let heading = format!("## {section}");
    let start = DOC
        .lines()
        .position(|l| l.trim() == heading)
        .unwrap_or_else(|| panic!("docs/cli.md has no `{heading}`"));
    DOC.lines()
        .skip(start + 1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            // `\|` is a `|` inside a cell.
            l.replace("\\|", "¦")
                .trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().replace('¦', "|"))
                .collect()
        })
        .collect()
}

/// The flags a cell names: the first word of each backticked span that starts with `-`.
fn flags_in(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|span| span.split([' ', '=']).next())
        .filter(|f| f.starts_with('-'))
        .map(String::from)
        .collect()
}

/// Every command path (`run`, `bench eval`, …) with its visible flags, global ones
/// included, `--help`/`--version` left out.
fn actual_flags() -> BTreeMap<String, BTreeSet<String>> {
    let mut cmd = Cli::command();
    cmd.build();
    let mut out = BTreeMap::new();
    fn walk(c: &clap::Command, path: &str, out: &mut BTreeMap<String, BTreeSet<String>>) {
        for sub in c.get_subcommands().filter(|s| s.get_name() != "help") {
            let path = match path {
                "" => sub.get_name().to_string(),
                p => format!("{p} {}", sub.get_name()),
            };
            let flags = sub
                .get_arguments()
                .filter(|a| !a.is_positional() && !a.is_hide_set())
                .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
                .flat_map(|a| {
                    let long = a.get_long().map(|l| format!("--{l}"));
                    let short = a.get_short().map(|s| format!("-{s}"));
                    long.into_iter().chain(short)
                })
                .collect();
            out.insert(path.clone(), flags);
            walk(sub, &path, out);
        }
    }
    walk(&cmd, "", &mut out);
    out
}

#[test]
fn every_commands_flags_are_the_flag_tables() {
    let actual = actual_flags();
    let mut documented: BTreeMap<String, BTreeSet<String>> = actual
        .keys()
        .map(|k| (k.clone(), BTreeSet::new()))
        .collect();
    for row in table("Flags") {
        let [_concept, flag, commands] = &row[..] else {
            panic!("docs/cli.md, Flags: a row needs 3 cells: {row:?}");
        };
        let flags = flags_in(flag);
        assert!(!flags.is_empty(), "docs/cli.md, Flags: no flag in {row:?}");
        let commands: Vec<String> = match commands.as_str() {
            "all" => actual.keys().cloned().collect(),
            list => list
                .split(',')
                .map(|c| c.trim().trim_matches('`').to_string())
                .collect(),
        };
        for c in commands {
            let set = documented
                .get_mut(&c)
                .unwrap_or_else(|| panic!("docs/cli.md, Flags: no command `tmas {c}`"));
            set.extend(flags.iter().cloned());
        }
    }
    let mut wrong = Vec::new();
    for (command, flags) in &actual {
        let doc = &documented[command];
        for f in flags.difference(doc) {
            wrong.push(format!("tmas {command} {f}: a flag the table lacks"));
        }
        for f in doc.difference(flags) {
            wrong.push(format!(
                "tmas {command} {f}: in the table, not a flag of the command"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/cli.md differs from the command line:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn old_spellings_are_the_old_spellings_table() {
    let mut documented = BTreeSet::new();
    for row in table("Old spellings") {
        let [old, new, commands] = &row[..] else {
            panic!("docs/cli.md, Old spellings: a row needs 3 cells: {row:?}");
        };
        let new = new.trim_matches('`').to_string();
        for old in flags_in(old) {
            for c in commands.split(',') {
                let c = c.trim().trim_matches('`').to_string();
                documented.insert((c, old.clone(), new.clone()));
            }
        }
    }
    let actual: BTreeSet<(String, String, String)> = OLD_SPELLINGS
        .iter()
        .map(|e| (e.command.to_string(), e.old.to_string(), e.new.to_string()))
        .collect();
    let missing: Vec<_> = actual.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&actual).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/cli.md, Old spellings: missing {missing:?}, not old spellings {extra:?}"
    );
    // And each parses (the aliases are added to a copy of the command line).
    with_old_spellings(Cli::command()).build();
}

#[test]
fn exit_codes_are_the_exit_code_table() {
    let documented: Vec<(u8, String)> = table("Exit codes")
        .iter()
        .map(|row| {
            let code = row[0]
                .trim_matches('`')
                .parse()
                .unwrap_or_else(|_| panic!("docs/cli.md, Exit codes: `{}` is not a code", row[0]));
            (code, row[1].clone())
        })
        .collect();
    let actual: Vec<(u8, String)> = exit::TABLE
        .iter()
        .map(|(c, m)| (*c, m.to_string()))
        .collect();
    assert_eq!(documented, actual, "docs/cli.md, Exit codes");
}

#[test]
fn required_options_show_in_the_usage_line() {
    let mut cmd = Cli::command();
    for (command, required) in [
        ("run", &["--config <FILE>", "--resume <DIR>"][..]),
        ("experiment", &["<FILE.toml>", "--resume <DIR>"]),
        (
            "select-hard",
            &["--config <FILE>", "--output <FILE>", "--from-run <DIR>"],
        ),
        ("rl-data", &["--output <FILE.parquet>"]),
        ("rl-rollouts", &["--config <FILE>", "--output <FILE>"]),
    ] {
        let sub = cmd.find_subcommand_mut(command).unwrap();
        let usage = sub.render_usage().to_string();
        for r in required {
            assert!(
                usage.contains(r),
                "tmas {command}: usage `{usage}` lacks {r}"
            );
        }
    }
}
