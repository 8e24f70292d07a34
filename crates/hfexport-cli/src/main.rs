//! The `hfexport` binary: the command line of the library beside it (`lib.rs`).

fn main() {
    std::process::exit(hfexport_cli::main(std::env::args_os()));
}
