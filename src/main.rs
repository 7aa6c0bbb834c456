use std::process::ExitCode;

/// mimalloc instead of glibc malloc: the engine allocates and frees request bodies and
/// replies of 40–350 KB at thousands per second; glibc serves each of those with a fresh
/// mmap that faults in page by page, mimalloc reuses freed blocks
/// (docs/performance-log.md). The `system-allocator` feature keeps glibc's, for heap
/// profilers that hook malloc, e.g. `cargo build --release --features system-allocator`
/// then `valgrind --tool=massif target/release/tmas bench eval …`.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    tmas::cli::main()
}
