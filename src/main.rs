//! The `keet` binary: everything lives in the library; this only sets the exit code.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(keet::cli::main());
}
