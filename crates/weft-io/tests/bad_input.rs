//! Malformed files: every case is a typed error naming the file, never a panic or a huge
//! allocation.

use std::path::{Path, PathBuf};

use weft_core::{Dataset, Error};
use weft_io::{Format, ReadOptions, info, read, read_any, read_ids, write};

fn put(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Asserts that opening and reading `path` (mapped and not) fails with a `Format` error naming
/// the file whose reason contains `needle`.
fn assert_format_error(path: &Path, needle: &str) {
    for mmap in [true, false] {
        let options = ReadOptions::new().with_mmap(mmap);
        let err = read_any(path, &options).unwrap_err();
        match &err {
            Error::Format { path: p, reason } => {
                assert_eq!(p, path);
                assert!(reason.contains(needle), "{reason:?} lacks {needle:?}");
            }
            other => panic!("{}: expected a format error, got {other:?}", path.display()),
        }
        assert!(err.to_string().contains(&*path.to_string_lossy()));
    }
}

fn vecs_row(dim: i32, values: &[f32]) -> Vec<u8> {
    let mut out = dim.to_le_bytes().to_vec();
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

#[test]
fn empty_files() {
    let dir = tempfile::tempdir().unwrap();
    for format in Format::ALL {
        let path = put(dir.path(), &format!("empty.{format}"), b"");
        let err = info(&path).unwrap_err();
        assert!(
            matches!(&err, Error::Format { reason, .. } if reason.contains("empty")),
            "{err:?}"
        );
    }
}

#[test]
fn unknown_extension() {
    let dir = tempfile::tempdir().unwrap();
    let path = put(dir.path(), "data.hdf5", b"whatever");
    let err = read_any(&path, &ReadOptions::default()).unwrap_err();
    assert!(
        matches!(&err, Error::Format { reason, .. } if reason.contains("unknown file extension")),
        "{err:?}"
    );
    assert!(err.to_string().contains("data.hdf5"));
    assert!(info(dir.path().join("no_extension")).is_err());
}

#[test]
fn missing_file_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = info(dir.path().join("absent.fbin")).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
}

#[test]
fn truncated_vecs_files() {
    let dir = tempfile::tempdir().unwrap();
    // Too short for the first header.
    assert_format_error(&put(dir.path(), "a.fvecs", &[4, 0]), "truncated");
    // A partially written last row.
    let mut bytes = vecs_row(3, &[1.0, 2.0, 3.0]);
    bytes.extend(vecs_row(3, &[4.0, 5.0, 6.0]));
    bytes.extend(&vecs_row(3, &[7.0, 8.0, 9.0])[..9]);
    let path = put(dir.path(), "b.fvecs", &bytes);
    assert_format_error(&path, "row 2 has 9 of its 16 bytes");
    // A first row that claims more than the file holds.
    assert_format_error(
        &put(dir.path(), "c.bvecs", &[0xff, 0xff, 0xff, 0x7f, 1, 2]),
        "truncated",
    );
}

#[test]
fn vecs_row_with_another_dimension() {
    let dir = tempfile::tempdir().unwrap();
    // Row 1 says dimension 2 but the file length still divides evenly by 16-byte rows, so the
    // mismatch is found when the rows are read.
    let mut bytes = vecs_row(3, &[1.0, 2.0, 3.0]);
    bytes.extend(vecs_row(2, &[4.0, 5.0, 6.0]));
    bytes.extend(vecs_row(3, &[7.0, 8.0, 9.0]));
    let path = put(dir.path(), "d.fvecs", &bytes);
    assert!(info(&path).is_ok(), "info does not read the rows");
    assert_format_error(&path, "row 1 has dimension 2 but the first row has 3");
    // Here the length does not divide: the open itself names the row.
    let mut bytes = vecs_row(3, &[1.0, 2.0, 3.0]);
    bytes.extend(vecs_row(3, &[4.0, 5.0, 6.0]));
    bytes.extend(vecs_row(4, &[7.0, 8.0, 9.0, 10.0]));
    let path = put(dir.path(), "e.fvecs", &bytes);
    assert!(matches!(info(&path), Err(Error::Format { .. })));
    assert_format_error(&path, "row 2 has dimension 4 but the first row has 3");
    // Non-positive first dimension.
    assert_format_error(
        &put(dir.path(), "f.ivecs", &vecs_row(0, &[])),
        "must be positive",
    );
    assert!(read_ids(put(dir.path(), "g.ivecs", &vecs_row(-3, &[1.0])), None).is_err());
}

#[test]
fn bin_header_claiming_more_rows_than_the_file_holds() {
    let dir = tempfile::tempdir().unwrap();
    // 4 billion rows of dimension 4 billion: must fail before allocating anything like that.
    let mut bytes = u32::MAX.to_le_bytes().to_vec();
    bytes.extend(u32::MAX.to_le_bytes());
    bytes.extend([0u8; 64]);
    assert_format_error(&put(dir.path(), "huge.fbin", &bytes), "truncated");
    assert_format_error(&put(dir.path(), "huge.u8bin", &bytes), "truncated");
    // Plausible header, one byte short.
    let mut bytes = 3u32.to_le_bytes().to_vec();
    bytes.extend(2u32.to_le_bytes());
    bytes.extend([0u8; 3 * 2 * 4 - 1]);
    assert_format_error(&put(dir.path(), "short.fbin", &bytes), "truncated");
    // Trailing bytes.
    bytes.extend([0u8; 5]);
    assert_format_error(&put(dir.path(), "long.fbin", &bytes), "trailing");
    // Header too short, zero dimension.
    assert_format_error(&put(dir.path(), "tiny.i8bin", &[1, 0, 0]), "truncated");
    let mut zero_dim = 5u32.to_le_bytes().to_vec();
    zero_dim.extend(0u32.to_le_bytes());
    assert_format_error(&put(dir.path(), "zero.fbin", &zero_dim), "dimension is 0");
    assert!(matches!(
        read_ids(put(dir.path(), "huge.ibin", &[0xff; 16]), None),
        Err(Error::Format { .. })
    ));
}

fn npy_bytes(header: &str, data: &[u8]) -> Vec<u8> {
    let mut text = header.to_string();
    while !(10 + text.len() + 1).is_multiple_of(64) {
        text.push(' ');
    }
    text.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((text.len() as u16).to_le_bytes());
    out.extend(text.as_bytes());
    out.extend(data);
    out
}

#[test]
fn malformed_npy_headers() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, Vec<u8>, &str)] = &[
        ("magic.npy", b"NUMPY\x01\x00\x10\x00{}".to_vec(), "magic"),
        (
            "version.npy",
            b"\x93NUMPY\x07\x00\x10\x00{}".to_vec(),
            "version",
        ),
        (
            "short.npy",
            b"\x93NUMPY\x01".to_vec(),
            "truncated .npy preamble",
        ),
        (
            "header_len.npy",
            b"\x93NUMPY\x01\x00\xff\xff{}".to_vec(),
            "header claims",
        ),
        (
            "not_dict.npy",
            npy_bytes("['descr', '<f4']", &[]),
            "not a dict",
        ),
        (
            "syntax.npy",
            npy_bytes(
                "{'descr': '<f4', 'fortran_order': False 'shape': (1, 1)}",
                &[0; 4],
            ),
            "malformed .npy header",
        ),
        (
            "missing_key.npy",
            npy_bytes("{'descr': '<f4', 'shape': (1, 1)}", &[0; 4]),
            "missing key 'fortran_order'",
        ),
        (
            "data_short.npy",
            npy_bytes(
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000)}",
                &[0; 8],
            ),
            "truncated",
        ),
        (
            "overflow.npy",
            npy_bytes(
                "{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551615, 3)}",
                &[0; 8],
            ),
            "truncated",
        ),
        (
            "zero_dim.npy",
            npy_bytes(
                "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0)}",
                &[],
            ),
            "dimension must be at least 1",
        ),
    ];
    for (name, bytes, needle) in cases {
        assert_format_error(&put(dir.path(), name, bytes), needle);
    }
}

#[test]
fn unsupported_npy_dtype_and_ndim() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &str)] = &[
        (
            "f8.npy",
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1)}",
            "unsupported .npy dtype '<f8'",
        ),
        (
            "c8.npy",
            "{'descr': '<c8', 'fortran_order': False, 'shape': (1, 1)}",
            "unsupported .npy dtype",
        ),
        (
            "record.npy",
            "{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (1, 1)}",
            "unsupported .npy dtype",
        ),
        (
            "one_d.npy",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4,)}",
            "has 1 dimensions",
        ),
        (
            "three_d.npy",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 2)}",
            "has 3 dimensions",
        ),
        (
            "zero_d.npy",
            "{'descr': '<f4', 'fortran_order': False, 'shape': ()}",
            "has 0 dimensions",
        ),
    ];
    for (name, header, needle) in cases {
        assert_format_error(&put(dir.path(), name, &npy_bytes(header, &[0; 64])), needle);
    }
    // Integer npy files hold ids, not vectors.
    let path = put(
        dir.path(),
        "ids.npy",
        &npy_bytes(
            "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 2)}",
            &[0xff; 16],
        ),
    );
    assert!(matches!(
        read_any(&path, &ReadOptions::default()),
        Err(Error::InvalidInput(_))
    ));
    // -1 maps to INVALID; other values must fit in 32 bits.
    assert_eq!(
        read_ids(&path, None).unwrap().as_slice(),
        &[u32::MAX, u32::MAX]
    );
    let mut big = Vec::new();
    big.extend((1u64 << 40).to_le_bytes());
    let path = put(
        dir.path(),
        "big_ids.npy",
        &npy_bytes(
            "{'descr': '<u8', 'fortran_order': False, 'shape': (1, 1)}",
            &big,
        ),
    );
    let err = read_ids(&path, None).unwrap_err().to_string();
    assert!(err.contains("does not fit in 32 bits"), "{err}");
}

#[test]
fn npy_with_non_finite_values() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = Vec::new();
    for v in [1.0f32, 2.0, f32::INFINITY, 4.0] {
        data.extend(v.to_le_bytes());
    }
    // Fortran order: element (r, c) at c * rows + r; index 2 is (0, 1).
    let path = put(
        dir.path(),
        "inf_f.npy",
        &npy_bytes(
            "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2)}",
            &data,
        ),
    );
    assert!(matches!(
        read::<f32>(&path, &ReadOptions::default()),
        Err(Error::NonFinite { row: 0, col: 1, .. })
    ));
    let kept: Dataset<f32> = read(&path, &ReadOptions::new().with_allow_non_finite(true)).unwrap();
    assert_eq!(kept.row(0), &[1.0, f32::INFINITY]);
}

#[test]
fn writing_to_a_missing_directory_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let data = Dataset::from_vec(vec![1.0f32], 1, 1).unwrap();
    let err = write(dir.path().join("no/such/dir/x.fbin"), data.view(), None).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
}
