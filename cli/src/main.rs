fn main() -> std::process::ExitCode {
    pleroma_cli::main()
}
