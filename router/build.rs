//! Fail the build early, with what to set, when the bundled SQLite would be
//! compiled without the pre-update hook or WAL snapshots (it would otherwise
//! fail at link time with an undefined `sqlite3_preupdate_hook`).

fn main() {
    println!("cargo:rerun-if-env-changed=LIBSQLITE3_FLAGS");
    let flags = std::env::var("LIBSQLITE3_FLAGS").unwrap_or_default();
    let has = |flag: &str| {
        flags
            .split_whitespace()
            .any(|f| f.trim_start_matches("-D") == flag)
    };
    if !has("SQLITE_ENABLE_PREUPDATE_HOOK") || !has("SQLITE_ENABLE_SNAPSHOT") {
        panic!(
            "pleroma needs SQLite's pre-update hook and WAL snapshots: set \
             LIBSQLITE3_FLAGS=\"SQLITE_ENABLE_PREUPDATE_HOOK SQLITE_ENABLE_SNAPSHOT\" for the build, \
             for instance in your project's .cargo/config.toml:\n\n\
             [env]\nLIBSQLITE3_FLAGS = \"SQLITE_ENABLE_PREUPDATE_HOOK SQLITE_ENABLE_SNAPSHOT\"\n"
        );
    }
}
