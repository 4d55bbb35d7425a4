//! The users file: one line per user,
//! `NAME SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey> [tls]`
//! (PostgreSQL's verifier format, base64 fields). The verifier lets the
//! server check a password without keeping it: neither it nor anything
//! equivalent to it is stored. `tls` means the user may only connect over
//! TLS (like a `hostssl` line of `pg_hba.conf`).

use std::collections::HashMap;
use std::path::Path;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use pgwire::api::auth::sasl::scram::{gen_salted_password, ScramSecret, SCRAM_ITERATIONS};
use ring::rand::{SecureRandom, SystemRandom};

#[derive(Clone, Debug)]
pub struct User {
    pub salt: Vec<u8>,
    pub iterations: usize,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub tls_required: bool,
}

impl User {
    /// A new verifier for `password`, with a fresh random salt.
    pub fn new(password: &str, tls_required: bool) -> User {
        let mut salt = vec![0u8; 16];
        SystemRandom::new()
            .fill(&mut salt)
            .expect("the system's random source failed");
        let salted = gen_salted_password(password, &salt, SCRAM_ITERATIONS);
        let ScramSecret::Verifier {
            salt,
            iterations,
            stored_key,
            server_key,
        } = ScramSecret::verifier_from_salted_password(salt, salted, SCRAM_ITERATIONS)
        else {
            unreachable!("verifier_from_salted_password returns a verifier")
        };
        User {
            salt,
            iterations,
            stored_key,
            server_key,
            tls_required,
        }
    }

    pub(crate) fn secret(&self) -> ScramSecret {
        ScramSecret::Verifier {
            salt: self.salt.clone(),
            iterations: self.iterations,
            stored_key: self.stored_key.clone(),
            server_key: self.server_key.clone(),
        }
    }

    fn line(&self, name: &str) -> String {
        format!(
            "{name} SCRAM-SHA-256${}:{}${}:{}{}",
            self.iterations,
            STANDARD.encode(&self.salt),
            STANDARD.encode(&self.stored_key),
            STANDARD.encode(&self.server_key),
            if self.tls_required { " tls" } else { "" }
        )
    }
}

/// The users of a users file, by name.
#[derive(Clone, Debug, Default)]
pub struct Users {
    pub users: HashMap<String, User>,
    order: Vec<String>,
}

impl Users {
    pub fn load(path: &Path) -> Result<Users, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the users file {}: {e}", path.display()))?;
        Users::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Users, String> {
        let mut users = Users::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: &str| format!("line {}: {why}", n + 1);
            let mut parts = line.split_whitespace();
            let name = parts.next().unwrap().to_owned();
            let verifier = parts
                .next()
                .ok_or_else(|| bad("no verifier after the name"))?;
            let tls_required = match parts.next() {
                None => false,
                Some("tls") => true,
                Some(other) => return Err(bad(&format!("unknown flag {other:?} (only `tls`)"))),
            };
            let rest = verifier
                .strip_prefix("SCRAM-SHA-256$")
                .ok_or_else(|| bad("the verifier must start with SCRAM-SHA-256$"))?;
            let (iter_salt, keys) = rest
                .split_once('$')
                .ok_or_else(|| bad("malformed verifier"))?;
            let (iter, salt) = iter_salt
                .split_once(':')
                .ok_or_else(|| bad("malformed verifier"))?;
            let (stored, server) = keys
                .split_once(':')
                .ok_or_else(|| bad("malformed verifier"))?;
            let b64 = |s: &str| {
                STANDARD
                    .decode(s)
                    .map_err(|_| bad("bad base64 in the verifier"))
            };
            let user = User {
                iterations: iter.parse().map_err(|_| bad("bad iteration count"))?,
                salt: b64(salt)?,
                stored_key: b64(stored)?,
                server_key: b64(server)?,
                tls_required,
            };
            if users.users.insert(name.clone(), user).is_none() {
                users.order.push(name);
            }
        }
        Ok(users)
    }

    pub fn set(&mut self, name: &str, user: User) {
        if self.users.insert(name.to_owned(), user).is_none() {
            self.order.push(name.to_owned());
        }
    }

    pub fn to_text(&self) -> String {
        let mut s = String::from("# pleroma serve users: NAME SCRAM-SHA-256 verifier [tls]\n");
        for name in &self.order {
            s.push_str(&self.users[name].line(name));
            s.push('\n');
        }
        s
    }
}

/// `pleroma serve --add-user FILE NAME`: adds or replaces NAME's verifier,
/// keeping the other lines; the file is written whole (0600) or not at all.
pub fn add_user(path: &Path, name: &str, password: &str, tls_required: bool) -> Result<(), String> {
    if name.is_empty() || name.chars().any(char::is_whitespace) {
        return Err(format!(
            "a user name must be non-empty without spaces: {name:?}"
        ));
    }
    if password.is_empty() {
        return Err("the password is empty".into());
    }
    let mut users = if path.exists() {
        Users::load(path)?
    } else {
        Users::default()
    };
    users.set(name, User::new(password, tls_required));
    let tmp = path.with_extension("tmp");
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = opts.open(&tmp)?;
        f.write_all(users.to_text().as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| format!("cannot write the users file {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_file_round_trips_and_holds_no_password() {
        let mut users = Users::default();
        users.set("ann", User::new("s3cret-pass", false));
        users.set("bob", User::new("other", true));
        let text = users.to_text();
        assert!(!text.contains("s3cret-pass"));
        let back = Users::parse(&text).unwrap();
        assert_eq!(back.to_text(), text);
        assert!(back.users["bob"].tls_required);
        assert!(!back.users["ann"].tls_required);
        assert!(Users::parse("ann plain-password").is_err());
    }
}
