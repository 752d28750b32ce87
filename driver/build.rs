//! Records the version of the system RocksDB the driver links against.
fn main() {
    let dir = std::env::var("ROCKSDB_INCLUDE_DIR").unwrap_or_else(|_| "/usr/include".into());
    let header = std::path::Path::new(&dir).join("rocksdb/version.h");
    println!("cargo:rerun-if-changed={}", header.display());
    if let Ok(text) = std::fs::read_to_string(&header) {
        let part = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("#define ROCKSDB_{name} ")))
                .map(|v| v.trim().to_string())
        };
        if let (Some(a), Some(b), Some(c)) = (part("MAJOR"), part("MINOR"), part("PATCH")) {
            println!("cargo:rustc-env=ALLOCLAB_ROCKSDB_VERSION={a}.{b}.{c}");
        }
    }
}
