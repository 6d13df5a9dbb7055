//! `.npy` files written by NumPy 2.4 itself (`tests/data/`, made with
//! `numpy.lib.format.write_array`): C and Fortran order, both byte orders, f16, u8, i8,
//! versions 1.0, 2.0 and 3.0, integer ids, and unsupported dtypes/shapes. The arrays are
//! 5 x 3 with element `(r, c) = 10 r + c` (+ 0.5 for floats, - 20 for i8).

use std::path::PathBuf;

use half::f16;
use weft_core::{Dataset, Error};
use weft_io::{Order, ReadOptions, StoredElement, info, read, read_ids, read_rows};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn expected(r: usize, c: usize) -> f32 {
    (r * 10 + c) as f32
}

fn check_f32(name: &str, order: Order, version: (u8, u8)) {
    let path = data(name);
    let i = info(&path).unwrap();
    assert_eq!(i.order, Some(order), "{name}");
    assert_eq!(i.npy_version, Some(version), "{name}");
    assert_eq!((i.rows, i.dim, i.element), (5, 3, StoredElement::F32));
    for mmap in [true, false] {
        let options = ReadOptions::new().with_mmap(mmap);
        let d: Dataset<f32> = read(&path, &options).unwrap();
        for r in 0..5 {
            for c in 0..3 {
                assert_eq!(d.row(r)[c], expected(r, c) + 0.5, "{name} ({r}, {c})");
            }
        }
        let part: Dataset<f32> = read_rows(&path, 1..4, &options).unwrap();
        assert_eq!(part.as_slice(), &d.as_slice()[3..12], "{name}");
    }
}

#[test]
fn f32_in_every_order_byte_order_and_version() {
    check_f32("f32_c.npy", Order::C, (1, 0));
    check_f32("f32_fortran.npy", Order::Fortran, (1, 0));
    check_f32("f32_big_endian.npy", Order::C, (1, 0));
    check_f32("f32_big_endian_fortran.npy", Order::Fortran, (1, 0));
    check_f32("f32_v2.npy", Order::C, (2, 0));
    check_f32("f32_v3.npy", Order::C, (3, 0));
    assert!(info(data("f32_big_endian.npy")).unwrap().big_endian);
}

#[test]
fn f16_u8_i8() {
    let options = ReadOptions::default();
    let h: Dataset<f16> = read(data("f16_c.npy"), &options).unwrap();
    assert_eq!(h.row(4)[2].to_f32(), 42.5);
    let u: Dataset<u8> = read(data("u8_c.npy"), &options).unwrap();
    assert_eq!(u.row(3), &[30, 31, 32]);
    let i: Dataset<i8> = read(data("i8_fortran.npy"), &options).unwrap();
    assert_eq!(i.row(0), &[-20, -19, -18]);
    assert_eq!(i.row(4), &[20, 21, 22]);
}

#[test]
fn integer_ids() {
    for name in ["ids_i32.npy", "ids_i64.npy"] {
        let ids = read_ids(data(name), None).unwrap();
        assert_eq!((ids.rows(), ids.cols()), (5, 3));
        assert_eq!(ids.row(2), &[20, 21, 22]);
    }
}

#[test]
fn unsupported_numpy_files() {
    for (name, needle) in [
        ("f64_c.npy", "unsupported .npy dtype '<f8'"),
        ("f32_1d.npy", "has 1 dimensions"),
        ("f32_3d.npy", "has 3 dimensions"),
    ] {
        match info(data(name)) {
            Err(Error::Format { reason, .. }) => assert!(reason.contains(needle), "{reason}"),
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn fortran_order_across_tile_boundaries() {
    // 130 x 70 (tiles are 64 x 64), written column-major by hand.
    let (rows, cols) = (130usize, 70usize);
    let value = |r: usize, c: usize| (r * 1000 + c) as f32;
    let header = format!("{{'descr': '<f4', 'fortran_order': True, 'shape': ({rows}, {cols}), }}");
    let mut text = header;
    while !(10 + text.len() + 1).is_multiple_of(64) {
        text.push(' ');
    }
    text.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((text.len() as u16).to_le_bytes());
    bytes.extend(text.as_bytes());
    for c in 0..cols {
        for r in 0..rows {
            bytes.extend(value(r, c).to_le_bytes());
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fortran.npy");
    std::fs::write(&path, bytes).unwrap();
    for mmap in [true, false] {
        let options = ReadOptions::new().with_mmap(mmap);
        let all: Dataset<f32> = read(&path, &options).unwrap();
        assert!(!all.is_mapped());
        for r in 0..rows {
            for c in 0..cols {
                assert_eq!(all.row(r)[c], value(r, c));
            }
        }
        for range in [0..1, 63..65, 1..130, 100..130] {
            let part: Dataset<f32> = read_rows(&path, range.clone(), &options).unwrap();
            assert_eq!(
                part.as_slice(),
                &all.as_slice()[range.start * cols..range.end * cols]
            );
        }
    }
}
