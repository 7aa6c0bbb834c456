use std::process::ExitCode;

fn main() -> ExitCode {
    tmas::cli::main()
}
