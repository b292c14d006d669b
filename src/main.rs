//! The `keet` binary: everything lives in the library; this only sets the exit code, and keeps
//! dependencies' stack traces out of keet's error messages.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // `RUST_BACKTRACE=1` is common on developers' machines. It makes every `Backtrace::capture`
    // record a trace, and candle prints the one it captures inside its error's message: a truncated
    // model file then read as one clear line followed by ~50 frames of candle internals. Library
    // backtraces follow `RUST_LIB_BACKTRACE` first, so keet turns them off unless that variable is
    // set; panics still print their backtrace under `RUST_BACKTRACE`. Set before any thread starts.
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        std::env::set_var("RUST_LIB_BACKTRACE", "0");
    }
    std::process::exit(keet::cli::main());
}
