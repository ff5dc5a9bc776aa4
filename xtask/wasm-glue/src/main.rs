//! `wasm-glue INPUT.wasm OUT_DIR OUT_NAME`: what `wasm-bindgen --target web --out-name OUT_NAME
//! --out-dir OUT_DIR INPUT.wasm` does, for `cargo xtask wasm` (see its module doc).

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, out_dir, out_name] = args.as_slice() else {
        eprintln!("usage: wasm-glue INPUT.wasm OUT_DIR OUT_NAME");
        return ExitCode::from(2);
    };
    // The CLI's defaults differ from the library's in two: TypeScript declarations, and the
    // default `.wasm` URL that lets the package's `index.js` initialize itself.
    let generated = wasm_bindgen_cli_support::Bindgen::new()
        .input_path(input)
        .out_name(out_name)
        .typescript(true)
        .omit_default_module_path(false)
        .web(true)
        .and_then(|bindgen| bindgen.generate(out_dir));
    match generated {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("wasm-glue: {input}: {error:#}");
            ExitCode::FAILURE
        }
    }
}
