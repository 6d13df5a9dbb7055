//! Builds and binds weft-gpu's own kernel modules (`kernels/exact`, `kernels/testing`) with
//! weft-kernel-build, and exports the shared device headers (`kernels/include/weft/`) to the
//! build scripts of the crates that depend on weft-gpu (as `DEP_WEFT_GPU_INCLUDE`), so that
//! every crate's kernels inline the same headers. Never runs nvidia-smi or touches a GPU.

fn main() {
    let manifest =
        std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let include = manifest.join("kernels").join("include");
    println!("cargo::metadata=include={}", include.display());
    let modules = weft_kernel_build::build_crate_kernels("crate");
    assert!(
        modules.iter().any(|m| m == "exact") && modules.iter().any(|m| m == "testing"),
        "weft-gpu's kernel modules are missing: {modules:?}"
    );
}
