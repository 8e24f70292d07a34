//! The `hfexport` binary: the command line of the library beside it (`lib.rs`).

fn main() {
    // Rust ignores SIGPIPE, so a closed pipe (`hfexport inspect DIR | head`) made `println!`
    // panic; with the default action the process ends quietly, as other Unix tools do
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(hfexport_cli::main(std::env::args_os()));
}
