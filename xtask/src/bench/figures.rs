//! A benchmark's named figures, and how they are printed and written to `target/bench/NAME.json`.

use std::fmt::Write as _;

/// Named figures of one benchmark, `<what>_<unit>` → value.
pub(crate) type Figures = Vec<(String, f64)>;

/// Writes `{"bench": NAME, "figures": {...}}` to `target/bench/NAME.json` and prints it.
pub(crate) fn write_figures(name: &str, figures: &Figures) -> anyhow::Result<()> {
    let mut map = serde_json::Map::new();
    let mut table = String::new();
    for (what, value) in figures {
        map.insert(what.clone(), serde_json::json!(value));
        let _ = writeln!(table, "  {what:<40} {value:>14.3}");
    }
    let document = serde_json::json!({ "bench": name, "figures": map });
    let dir = crate::project_root().join("target").join("bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&document)? + "\n")?;
    println!("bench {name}:\n{table}written to {}", path.display());
    Ok(())
}
