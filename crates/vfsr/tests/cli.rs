//! The command line as a user runs it: `vfsr lookup`, `vfsr table gen`, bad arguments.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn vfsr() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vfsr"))
}

fn temp_file(name: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vfsr-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

const TABLE: &str = "# a small table\n\
                     10.0.0.0/8 192.0.2.1\n\
                     10.1.0.0/16\n\
                     0.0.0.0/0 192.0.2.254\n\
                     2001:db8::/32 2001:db8::1\n\
                     \n";

#[test]
fn lookup_prints_address_prefix_and_next_hop_for_every_backend() {
    let t = temp_file("t.txt", TABLE);
    for backend in ["poptrie", "poptrie16", "lctrie", "radix", "dir24"] {
        let out = vfsr()
            .args(["lookup", "--table"])
            .arg(&t)
            .args([
                "--backend",
                backend,
                "10.2.3.4",
                "8.8.8.8",
                "2001:db8::5",
                "2001:db9::1",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{backend}: {out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "10.2.3.4 10.0.0.0/8 via 192.0.2.1",
                "8.8.8.8 0.0.0.0/0 via 192.0.2.254",
                "2001:db8::5 2001:db8::/32 via 2001:db8::1",
                "2001:db9::1 - unreachable",
            ],
            "{backend}"
        );
    }
}

#[test]
fn lookup_reads_addresses_from_stdin_and_names_nh64_next_hops() {
    let t = temp_file("s.txt", TABLE);
    let mut child = vfsr()
        .args(["lookup", "--table"])
        .arg(&t)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"10.1.2.3\n\n# comment\n10.200.0.1\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(
        lines[0].starts_with("10.1.2.3 10.1.0.0/16 nh64 #"),
        "{}",
        lines[0]
    );
    assert_eq!(lines[1], "10.200.0.1 10.0.0.0/8 via 192.0.2.1");
}

#[test]
fn a_bad_table_line_is_an_error_naming_file_and_line_unless_skipped() {
    let t = temp_file("bad.txt", "10.0.0.0/8 192.0.2.1\n10.0.0.1/8\n");
    let out = vfsr()
        .args(["lookup", "--table"])
        .arg(&t)
        .arg("10.0.0.1")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("bad.txt:2"), "{err}");
    assert!(err.contains("host bits"), "{err}");

    let out = vfsr()
        .args(["lookup", "--skip-bad", "--table"])
        .arg(&t)
        .arg("10.0.0.1")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        "10.0.0.1 10.0.0.0/8 via 192.0.2.1"
    );
}

#[test]
fn wrong_arguments_are_clear_errors() {
    let t = temp_file("w.txt", TABLE);
    let out = vfsr()
        .args(["lookup", "--backend", "bogus", "--table"])
        .arg(&t)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr).unwrap().contains("bogus"));

    let out = vfsr()
        .args(["lookup", "--table"])
        .arg(&t)
        .arg("not-an-address")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("not-an-address"));

    let out = vfsr()
        .args(["lookup", "--table", "/nonexistent/table.txt", "1.1.1.1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("/nonexistent/table.txt"));
}

#[test]
fn generated_table_reads_back_with_the_requested_sizes() {
    let dir = std::env::temp_dir().join(format!("vfsr-gen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("gen.txt");
    let out = vfsr()
        .args([
            "table", "gen", "--seed", "7", "--v4", "5000", "--v6", "800", "-o",
        ])
        .arg(&f)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (t, _) = vfsr_table::read_table_file(&f, &Default::default()).unwrap();
    assert_eq!(t.v4.len(), 5000);
    assert_eq!(t.v6.len(), 800);
    // The same seed gives the same file.
    let again = vfsr()
        .args(["table", "gen", "--seed", "7", "--v4", "5000", "--v6", "800"])
        .output()
        .unwrap();
    assert_eq!(again.stdout, std::fs::read(&f).unwrap());
}
