//! How a test that cannot run on this machine says so.
//!
//! A test that needs what the machine lacks (root, a routing daemon, a kernel feature) returns
//! early after calling [`skip`] with the reason. The test harness keeps a passing test's output
//! to itself, so the reason is also appended, one line per skip, to the file named by the
//! environment variable [`LOG_VAR`] when it is set: `test.sh` sets it and lists the skipped
//! tests at the end of the run, so that a skip is seen without `--nocapture`.

#![forbid(unsafe_code)]

use std::fmt::Display;
use std::io::Write;

/// The environment variable naming the file skips are appended to.
pub const LOG_VAR: &str = "VFSR_SKIP_LOG";

/// Says that the running test is skipped, and why: `skipped: <why>` on standard output, and a
/// line `<file> <test>: <why>` appended to the file named by [`LOG_VAR`], if set (`<file>` is
/// the source file that called, `<test>` the name the harness gave the test's thread). A log
/// that cannot be written is reported on standard error and otherwise ignored: it must not
/// fail the test.
#[track_caller]
pub fn skip(why: impl Display) {
    let file = std::panic::Location::caller().file();
    println!("skipped: {why}");
    let Some(path) = std::env::var_os(LOG_VAR) else {
        return;
    };
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("unnamed test");
    // One write of one line, to a file opened for appending: lines from tests running at once
    // do not interleave.
    let line = format!("{file} {test}: {why}\n");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        eprintln!(
            "vfsr-skip: cannot append to {}: {e}",
            path.to_string_lossy()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_appended_with_the_test_name() {
        let dir = std::env::temp_dir().join(format!("vfsr-skip-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("skipped.txt");
        let _ = std::fs::remove_file(&log);
        // Only this test sets the variable in this process (one test in the crate).
        std::env::set_var(LOG_VAR, &log);
        skip("no frobnicator here");
        skip(format_args!("needs {} of {}", 2, 3));
        std::env::remove_var(LOG_VAR);
        skip("not logged");
        let text = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "crates/skip/src/lib.rs tests::a_skip_is_appended_with_the_test_name: no frobnicator here",
                "crates/skip/src/lib.rs tests::a_skip_is_appended_with_the_test_name: needs 2 of 3",
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
