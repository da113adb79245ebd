//! Build script of vfsr-bench. Without the `dpdk` feature it does nothing. With it, it asks
//! `pkg-config` for DPDK (`libdpdk`), compiles the C shim `csrc/dpdk_shim.c` against DPDK's
//! headers and links the DPDK libraries the peers call (EAL, LPM, FIB, RIB).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "dpdk")]
    dpdk::build();
}

#[cfg(feature = "dpdk")]
mod dpdk {
    use std::process::Command;

    /// DPDK libraries the peers call directly; their own dependencies come with them.
    const LIBS: &[&str] = &["rte_eal", "rte_lpm", "rte_fib", "rte_rib"];

    fn pkg_config(args: &[&str]) -> String {
        let out = Command::new("pkg-config")
            .args(args)
            .arg("libdpdk")
            .output();
        match out {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
            Ok(o) => panic!(
                "the `dpdk` feature needs DPDK's development files: `pkg-config {} libdpdk` \
                 failed ({}). On Debian 12: apt-get install libdpdk-dev pkg-config",
                args.join(" "),
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => panic!(
                "the `dpdk` feature needs pkg-config to find DPDK, and running it failed: {e}. \
                 On Debian 12: apt-get install libdpdk-dev pkg-config"
            ),
        }
    }

    pub fn build() {
        println!("cargo:rerun-if-changed=csrc/dpdk_shim.c");
        println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
        let version = pkg_config(&["--modversion"]);
        let cflags = pkg_config(&["--cflags"]);
        let lib_dirs = pkg_config(&["--libs-only-L"]);

        let mut cc = cc::Build::new();
        cc.file("csrc/dpdk_shim.c")
            // rte_vect_{get,set}_max_simd_bitwidth are still "experimental" in 22.11.
            .define("ALLOW_EXPERIMENTAL_API", None)
            .warnings(true);
        // pkg-config's flags include `-include rte_config.h` (two words) and a -march; pass
        // them through as given.
        for flag in cflags.split_whitespace() {
            cc.flag(flag);
        }
        cc.compile("vfsr_dpdk_shim");

        for dir in lib_dirs.split_whitespace() {
            if let Some(d) = dir.strip_prefix("-L") {
                println!("cargo:rustc-link-search=native={d}");
            }
        }
        for lib in LIBS {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
        println!("cargo:rustc-env=VFSR_DPDK_VERSION={version}");
    }
}
