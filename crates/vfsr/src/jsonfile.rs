//! The `--json` file of every command that writes one (the benches, `cp flood`, `stress`,
//! `soak`): the results document, indented, and a line on standard error that says where it
//! went.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Why a `--json` file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The document could not be made into text.
    #[error(transparent)]
    Json(serde_json::Error),
    /// The file could not be written.
    #[error("{}: {err}", .path.display())]
    File {
        path: PathBuf,
        #[source]
        err: std::io::Error,
    },
}

/// Writes `doc` to `path` as indented JSON and says so on standard error.
pub(crate) fn write(path: &Path, doc: &Value) -> Result<(), Error> {
    let text = serde_json::to_string_pretty(doc).map_err(Error::Json)?;
    std::fs::write(path, text).map_err(|err| Error::File {
        path: path.to_path_buf(),
        err,
    })?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_is_written_indented_and_a_bad_path_is_named() {
        let dir = std::env::temp_dir().join(format!("vfsr-jsonfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let path = dir.join("r.json");
        write(&path, &serde_json::json!({"a": [1]})).unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(text, "{\n  \"a\": [\n    1\n  ]\n}");
        let missing = dir.join("no/such/dir/r.json");
        let e = write(&missing, &serde_json::json!(null)).err();
        assert!(
            e.as_ref().is_some_and(|e| e
                .to_string()
                .starts_with(&format!("{}: ", missing.display()))
                && std::error::Error::source(e).is_some()),
            "{e:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
