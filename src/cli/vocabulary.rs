//! The command line's old spellings: each still parses, as a hidden alias of the flag that
//! replaced it, and prints a one-line note naming the new spelling. `docs/cli.md` lists the
//! same pairs (a test compares them).

use std::collections::BTreeSet;

use clap::ArgMatches;

/// A flag spelling that was replaced: `old` still works in `command` and means `new`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OldSpelling {
    /// The command path as typed after `tmas`, e.g. `bench eval`.
    pub command: &'static str,
    /// `--long` or `-s`.
    pub old: &'static str,
    /// The flag that replaced it (`--long`), or, for a hidden flag kept under its old
    /// name, what to write instead.
    pub new: &'static str,
}

const fn old(command: &'static str, old: &'static str, new: &'static str) -> OldSpelling {
    OldSpelling { command, old, new }
}

/// Every old spelling. When `new` is a flag of `command`, `old` is added to it as a hidden
/// alias; otherwise `old` is a hidden flag of its own that does what `new` says.
pub const OLD_SPELLINGS: &[OldSpelling] = &[
    old("run", "--status-every", "--progress-every"),
    old("run", "--out-dir", "--set run.out_dir=DIR"),
    old("experiment", "--status-every", "--progress-every"),
    old("select-hard", "--out", "--output"),
    old("select-hard", "--out-dir", "--set run.out_dir=DIR"),
    old("select-hard", "-n", "--take"),
    old("select-hard", "--draw-seed", "--selection-seed"),
    old("export", "--out", "--output"),
    old("judge", "--out", "--output"),
    old("report", "--seed", "--permutation-seed"),
    old("rl-data", "--out", "--output"),
    old("rl-data", "--seed", "--selection-seed"),
    old("rl-rollouts", "--out", "--output"),
    old("rl-rollouts", "--seed", "--selection-seed"),
    old("rl-score", "--out", "--output"),
    old("sim-server", "--seed", "--sim-seed"),
    old("bench client", "--in-flight", "--max-in-flight"),
    old("bench eval", "--n", "--candidates"),
    old("bench eval", "--m", "--verifications"),
    old("bench eval", "--in-flight", "--max-in-flight"),
    old("bench eval", "--keep-run", "--out"),
    old("bench schedule", "--n", "--candidates"),
    old("bench schedule", "--m", "--verifications"),
    old("bench schedule", "--in-flight", "--max-in-flight"),
    old("bench schedule", "--seeds", "--latency-draws"),
    old("bench soak", "--n", "--candidates"),
    old("bench soak", "--m", "--verifications"),
    old("bench soak", "--in-flight", "--max-in-flight"),
    old("bench soak", "--limit", "--limit-policy"),
    old("bench soak", "--keep-runs", "--out"),
];

/// `cmd` (the whole `tmas` command) with every old spelling added as a hidden alias of
/// the flag that replaced it. Panics on a table entry that names no such command or flag:
/// a programming error, caught by the tests.
pub fn with_old_spellings(mut cmd: clap::Command) -> clap::Command {
    for entry in OLD_SPELLINGS {
        let Some(new_long) = flag_name(entry.new) else {
            continue; // a hidden flag of its own, declared where it is handled
        };
        let path: Vec<&str> = entry.command.split(' ').collect();
        cmd = mut_path(cmd, &path, &|c: clap::Command| {
            let id = c
                .get_arguments()
                .find(|a| a.get_long() == Some(new_long))
                .unwrap_or_else(|| panic!("`{}` has no flag {}", entry.command, entry.new))
                .get_id()
                .clone();
            c.mut_arg(id, |a| match entry.old.strip_prefix("--") {
                Some(long) => a.alias(long),
                None => a.short_alias(short_char(entry.old)),
            })
        });
    }
    cmd
}

/// The long name of `spelling` when it is a single flag (`--out` → `out`).
fn flag_name(spelling: &str) -> Option<&str> {
    spelling
        .strip_prefix("--")
        .filter(|s| !s.contains([' ', '=']))
}

fn short_char(spelling: &str) -> char {
    let mut chars = spelling.chars().skip(1);
    match (chars.next(), chars.next()) {
        (Some(c), None) => c,
        _ => panic!("`{spelling}` is not a short flag"),
    }
}

fn mut_path(
    cmd: clap::Command,
    path: &[&str],
    f: &dyn Fn(clap::Command) -> clap::Command,
) -> clap::Command {
    match path {
        [] => f(cmd),
        [first, rest @ ..] => cmd.mut_subcommand(*first, |sub| mut_path(sub, rest, f)),
    }
}

/// The command path of a parse, e.g. `bench eval`.
pub fn command_path(matches: &ArgMatches) -> String {
    let mut path = Vec::new();
    let mut m = matches;
    while let Some((name, sub)) = m.subcommand() {
        path.push(name);
        m = sub;
    }
    path.join(" ")
}

/// The old spellings `args` (the process's arguments, program name first) uses in the
/// command at `path`, each once, in table order.
pub fn old_spellings_used(path: &str, args: &[String]) -> Vec<OldSpelling> {
    // Flags end at `--`; a subcommand's own flags come after its name.
    let tokens: Vec<&str> = args
        .iter()
        .skip(1)
        .map(String::as_str)
        .take_while(|t| *t != "--")
        .collect();
    let mut seen = BTreeSet::new();
    OLD_SPELLINGS
        .iter()
        .filter(|e| e.command == path)
        .filter(|e| tokens.iter().any(|t| spells(t, e.old)))
        .filter(|e| seen.insert(e.old))
        .copied()
        .collect()
}

/// True when the token `t` is the flag `old` (`--old`, `--old=V`, `-o`, `-oV`).
fn spells(t: &str, old: &str) -> bool {
    if old.starts_with("--") {
        t == old
            || t.strip_prefix(old)
                .is_some_and(|rest| rest.starts_with('='))
    } else {
        !t.starts_with("--") && t.starts_with(old)
    }
}

/// The note printed for a use of an old spelling.
pub fn note(entry: &OldSpelling) -> String {
    format!(
        "note: `{}` is deprecated in `tmas {}`; use `{}`",
        entry.old, entry.command, entry.new
    )
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches};

    use super::*;
    use crate::cli::Cli;

    fn parse(line: &str) -> Cli {
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        let matches = with_old_spellings(Cli::command())
            .try_get_matches_from(&args)
            .unwrap_or_else(|e| panic!("{line}: {e}"));
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    fn path_of(line: &str) -> String {
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        let matches = with_old_spellings(Cli::command())
            .try_get_matches_from(&args)
            .unwrap();
        command_path(&matches)
    }

    #[test]
    fn every_old_spelling_parses_in_its_command_as_the_new_one() {
        let cmd = with_old_spellings(Cli::command());
        for e in OLD_SPELLINGS {
            let mut sub = &cmd;
            for name in e.command.split(' ') {
                sub = sub
                    .find_subcommand(name)
                    .unwrap_or_else(|| panic!("no command {}", e.command));
            }
            let found = sub.get_arguments().find(|a| {
                let longs = a
                    .get_long()
                    .into_iter()
                    .chain(a.get_all_aliases().into_iter().flatten());
                match e.old.strip_prefix("--") {
                    Some(long) => longs.into_iter().any(|l| l == long),
                    None => a
                        .get_all_short_aliases()
                        .is_some_and(|s| s.contains(&short_char(e.old))),
                }
            });
            let arg = found.unwrap_or_else(|| panic!("{}: {} does not parse", e.command, e.old));
            // Either hidden itself or a hidden alias of the visible new flag.
            match flag_name(e.new) {
                Some(new) => assert_eq!(arg.get_long(), Some(new), "{e:?}"),
                None => assert!(arg.is_hide_set(), "{e:?}: the old flag must be hidden"),
            }
        }
    }

    #[test]
    fn old_spellings_give_the_same_values() {
        let Cli { command, .. } = parse("tmas bench schedule --n 3 --m 2 --in-flight 7 --seeds 2");
        let crate::cli::Command::Bench(crate::cli::bench_cmd::BenchCommand::Schedule(a)) = command
        else {
            panic!("not bench schedule")
        };
        assert_eq!(
            (a.workload.n, a.workload.m, a.in_flight, a.seeds),
            (3, 2, 7, 2)
        );
        let Cli { command, .. } = parse("tmas select-hard --from-run r -n 5 --out x.jsonl");
        let crate::cli::Command::SelectHard(a) = command else {
            panic!("not select-hard")
        };
        assert_eq!(a.take, 5);
        assert_eq!(a.output, std::path::PathBuf::from("x.jsonl"));
    }

    #[test]
    fn uses_are_found_in_their_command_only() {
        let line = "tmas bench eval --n=3 --m 2 --iterations 4";
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        let used = old_spellings_used(&path_of(line), &args);
        let olds: Vec<&str> = used.iter().map(|e| e.old).collect();
        assert_eq!(olds, ["--n", "--m"]);
        // `--seed` is old in `report`, current in `run`.
        let line = "tmas run -c config/demo.toml --seed 3";
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        assert!(old_spellings_used(&path_of(line), &args).is_empty());
        assert!(spells("-n5", "-n") && spells("-n", "-n") && !spells("--n", "-n"));
        assert!(!spells("--out-dir", "--out") && spells("--out=x", "--out"));
    }
}
