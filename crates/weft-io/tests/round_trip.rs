//! Write-then-read round trips for every format and element type, row-range reads, the
//! streaming writer, ids, and `info`.

use half::f16;
use proptest::prelude::*;
use weft_core::{DType, Dataset, Element};
use weft_io::{
    AnyDataset, Format, IdMatrix, Order, ReadOptions, StoredElement, VectorFile, VectorWriter,
    info, read, read_any, read_ids, read_rows, write, write_ids,
};

/// Every (format, element type) pair a vector can be written in.
fn vector_formats(dtype: DType) -> Vec<Format> {
    Format::vector_formats_for(dtype)
}

fn options(mmap: bool) -> ReadOptions {
    ReadOptions::new().with_mmap(mmap)
}

/// Writes `data` in every format that holds `T`, reads it back (mapped and not, whole and by
/// row range) and checks it is identical.
fn check_round_trip<T: Element>(data: &Dataset<T>) {
    let dir = tempfile::tempdir().unwrap();
    for format in vector_formats(T::DTYPE) {
        let path = dir.path().join(format!("data.{format}"));
        write(&path, data.view(), None).unwrap();
        if data.rows() == 0 && format.is_vecs() {
            // An empty *vecs file cannot record its dimension: it reads as an empty file.
            assert!(matches!(info(&path), Err(weft_core::Error::Format { .. })));
            continue;
        }
        let i = info(&path).unwrap();
        assert_eq!(i.format, format);
        assert_eq!(i.dtype(), Some(T::DTYPE));
        assert_eq!((i.rows, i.dim), (data.rows(), data.dim()));
        assert_eq!(i.file_bytes, std::fs::metadata(&path).unwrap().len());
        for mmap in [true, false] {
            let back: Dataset<T> = read(&path, &options(mmap)).unwrap();
            assert_eq!(
                bytemuck::cast_slice::<T, u8>(back.as_slice()),
                bytemuck::cast_slice::<T, u8>(data.as_slice()),
                "{format} mmap={mmap}"
            );
            assert_eq!((back.rows(), back.dim()), (data.rows(), data.dim()));
            let any = read_any(&path, &options(mmap)).unwrap();
            assert_eq!(any.dtype(), T::DTYPE);
            let n = data.rows();
            let (a, b) = (n / 3, n - n / 4);
            let part: Dataset<T> = read_rows(&path, a..b, &options(mmap)).unwrap();
            assert_eq!(part.rows(), b - a);
            assert_eq!(
                bytemuck::cast_slice::<T, u8>(part.as_slice()),
                bytemuck::cast_slice::<T, u8>(&data.as_slice()[a * data.dim()..b * data.dim()]),
            );
        }
    }
}

fn dataset<T: Element>(rows: usize, dim: usize, values: &[T]) -> Dataset<T> {
    Dataset::from_vec(values[..rows * dim].to_vec(), rows, dim).unwrap()
}

fn finite_f32() -> impl Strategy<Value = f32> {
    prop::num::f32::NORMAL | prop::num::f32::ZERO | prop::num::f32::SUBNORMAL
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn f32_round_trips(rows in 0usize..20, dim in 1usize..9,
                       values in prop::collection::vec(finite_f32(), 160)) {
        check_round_trip(&dataset(rows, dim, &values));
    }

    #[test]
    fn f16_round_trips(rows in 0usize..20, dim in 1usize..9,
                       bits in prop::collection::vec(any::<u16>(), 160)) {
        // Finite f16 values only (NaN payloads are rejected on read by default).
        let values: Vec<f16> = bits
            .into_iter()
            .map(f16::from_bits)
            .map(|v| if v.is_finite() { v } else { f16::ONE })
            .collect();
        check_round_trip(&dataset(rows, dim, &values));
    }

    #[test]
    fn u8_round_trips(rows in 0usize..20, dim in 1usize..9,
                      values in prop::collection::vec(any::<u8>(), 160)) {
        check_round_trip(&dataset(rows, dim, &values));
    }

    #[test]
    fn i8_round_trips(rows in 0usize..20, dim in 1usize..9,
                      values in prop::collection::vec(any::<i8>(), 160)) {
        check_round_trip(&dataset(rows, dim, &values));
    }

    #[test]
    fn ids_round_trip(rows in 0usize..20, cols in 1usize..9,
                      values in prop::collection::vec(any::<u32>(), 160)) {
        let dir = tempfile::tempdir().unwrap();
        let ids = IdMatrix::new(values[..rows * cols].to_vec(), rows, cols).unwrap();
        for format in [Format::Ivecs, Format::Ibin, Format::Npy] {
            let path = dir.path().join(format!("gt.{format}"));
            write_ids(&path, &ids, None).unwrap();
            if rows == 0 && format == Format::Ivecs {
                prop_assert!(read_ids(&path, None).is_err(), "an empty ivecs file is empty");
                continue;
            }
            prop_assert_eq!(&read_ids(&path, None).unwrap(), &ids);
            let i = info(&path).unwrap();
            prop_assert!(i.element.is_id());
        }
    }
}

#[test]
fn mapped_reads_are_zero_copy_where_the_layout_allows() {
    let dir = tempfile::tempdir().unwrap();
    let data = Dataset::from_fn(10, 4, |r, c| (r * 4 + c) as f32).unwrap();
    for (format, mapped) in [
        (Format::Fbin, true),
        (Format::Npy, true),
        (Format::Fvecs, false),
    ] {
        let path = dir.path().join(format!("d.{format}"));
        write(&path, data.view(), None).unwrap();
        let back: Dataset<f32> = read(&path, &ReadOptions::default()).unwrap();
        assert_eq!(back.is_mapped(), mapped, "{format}");
        let part: Dataset<f32> = read_rows(&path, 3..7, &ReadOptions::default()).unwrap();
        assert_eq!(part.is_mapped(), mapped, "{format}");
        assert_eq!(part.row(0), data.row(3));
        let copied: Dataset<f32> = read(&path, &ReadOptions::new().with_mmap(false)).unwrap();
        assert!(!copied.is_mapped());
    }
}

#[test]
fn explicit_format_overrides_the_extension() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vectors.bin");
    let data = Dataset::from_fn(3, 2, |r, c| (r + c) as u8).unwrap();
    write(&path, data.view(), Some(Format::U8bin)).unwrap();
    assert!(read::<u8>(&path, &ReadOptions::default()).is_err());
    let back: Dataset<u8> = read(&path, &ReadOptions::new().with_format(Format::U8bin)).unwrap();
    assert_eq!(back.as_slice(), data.as_slice());
}

#[test]
fn streaming_writer_patches_the_row_count_and_renames_atomically() {
    let dir = tempfile::tempdir().unwrap();
    for format in [Format::Fbin, Format::Npy, Format::Fvecs] {
        let path = dir.path().join(format!("stream.{format}"));
        let mut writer = VectorWriter::<f32>::create(&path, 3, None).unwrap();
        assert!(!path.exists(), "nothing at the target before finish");
        for r in 0..1000 {
            writer.push_row(&[r as f32, -(r as f32), 0.5]).unwrap();
        }
        let block = Dataset::from_fn(5, 3, |r, c| (r * 3 + c) as f32).unwrap();
        writer.push_rows(block.view()).unwrap();
        assert!(writer.push_row(&[1.0]).is_err(), "wrong row length");
        assert_eq!(writer.finish().unwrap(), 1005);
        let back: Dataset<f32> = read(&path, &ReadOptions::default()).unwrap();
        assert_eq!(back.rows(), 1005);
        assert_eq!(back.row(999), &[999.0, -999.0, 0.5]);
        assert_eq!(back.row(1004), block.row(4));
        // Only the target is left in the directory.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(names.is_empty(), "temporary files left: {names:?}");
    }
}

#[test]
fn dropping_an_unfinished_writer_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("partial.u8bin");
    std::fs::write(&path, b"old contents").unwrap();
    {
        let mut writer = VectorWriter::<u8>::create(&path, 2, None).unwrap();
        writer.push_row(&[1, 2]).unwrap();
    }
    assert_eq!(std::fs::read(&path).unwrap(), b"old contents");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn writers_refuse_formats_that_cannot_hold_the_type() {
    let dir = tempfile::tempdir().unwrap();
    assert!(VectorWriter::<f16>::create(dir.path().join("x.fbin"), 4, None).is_err());
    assert!(VectorWriter::<f32>::create(dir.path().join("x.bvecs"), 4, None).is_err());
    assert!(VectorWriter::<f32>::create(dir.path().join("x.ivecs"), 4, None).is_err());
    assert!(VectorWriter::<f32>::create(dir.path().join("x.fbin"), 0, None).is_err());
    assert!(VectorWriter::<i8>::create(dir.path().join("x.i8bin"), 4, None).is_ok());
    let ids = IdMatrix::new(vec![1, 2], 1, 2).unwrap();
    assert!(write_ids(dir.path().join("x.fbin"), &ids, None).is_err());
}

#[test]
fn typed_read_of_another_dtype_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.u8bin");
    write(
        &path,
        Dataset::from_fn(4, 2, |r, _| r as u8).unwrap().view(),
        None,
    )
    .unwrap();
    let err = read::<f32>(&path, &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("u8") && err.contains("f32") && err.contains("b.u8bin"),
        "{err}"
    );
    let converted = read_any(&path, &ReadOptions::default()).unwrap().into_f32();
    assert_eq!(converted.row(3), &[3.0, 3.0]);
    // Id files are not vectors and vector files are not ids.
    let ids_path = dir.path().join("gt.ivecs");
    write_ids(&ids_path, &IdMatrix::new(vec![7, 8], 1, 2).unwrap(), None).unwrap();
    assert!(read_any(&ids_path, &ReadOptions::default()).is_err());
    assert!(read_ids(&path, None).is_err());
}

#[test]
fn ivecs_minus_one_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gt.ivecs");
    let mut bytes = Vec::new();
    for row in [[3i32, -1], [0, 1]] {
        bytes.extend_from_slice(&2i32.to_le_bytes());
        for v in row {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
    }
    std::fs::write(&path, bytes).unwrap();
    let ids = read_ids(&path, None).unwrap();
    assert_eq!(ids.row(0), &[3, weft_core::INVALID]);
    assert_eq!(ids.into_parts(), (2, 2, vec![3, u32::MAX, 0, 1]));
}

#[test]
fn info_reports_without_reading_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.fvecs");
    write(
        &path,
        Dataset::from_fn(7, 5, |r, c| (r + c) as f32)
            .unwrap()
            .view(),
        None,
    )
    .unwrap();
    let i = info(&path).unwrap();
    assert_eq!(i.element, StoredElement::F32);
    assert_eq!((i.rows, i.dim, i.row_bytes, i.file_bytes), (7, 5, 24, 168));
    assert_eq!(i.order, None);
    let path = dir.path().join("v.npy");
    write(
        &path,
        Dataset::from_fn(7, 5, |r, c| (r + c) as i8).unwrap().view(),
        None,
    )
    .unwrap();
    let i = info(&path).unwrap();
    assert_eq!(
        (i.order, i.npy_version, i.data_offset),
        (Some(Order::C), Some((1, 0)), 128)
    );
    assert_eq!(i.data_bytes(), 35);
    assert_eq!(
        i.to_string(),
        "npy: 7 x 5 i8, 163 bytes (data at byte 128), C order, npy 1.0"
    );
    let json = serde_json::to_value(&i).unwrap();
    assert_eq!(json["format"], "npy");
    assert_eq!(json["element"], "i8");
    assert_eq!(json["order"], "C");
    assert_eq!(json["rows"], 7);
}

#[test]
fn non_finite_values_are_rejected_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let mut values = vec![1.0f32; 12];
    values[7] = f32::NAN; // row 2 of dimension 3, column 1
    let data = Dataset::from_vec(values, 4, 3).unwrap();
    for format in [Format::Fvecs, Format::Fbin, Format::Npy] {
        let path = dir.path().join(format!("nan.{format}"));
        write(&path, data.view(), None).unwrap();
        for mmap in [true, false] {
            match read::<f32>(&path, &options(mmap)) {
                Err(weft_core::Error::NonFinite { row: 2, col: 1, .. }) => {}
                other => panic!("{format}: {other:?}"),
            }
            // A range that starts later reports the row's number in the file.
            match read_rows::<f32>(&path, 1..4, &options(mmap)) {
                Err(weft_core::Error::NonFinite { row: 2, col: 1, .. }) => {}
                other => panic!("{format}: {other:?}"),
            }
            assert!(read_rows::<f32>(&path, 3..4, &options(mmap)).is_ok());
            let kept: Dataset<f32> =
                read(&path, &options(mmap).with_allow_non_finite(true)).unwrap();
            assert!(kept.row(2)[1].is_nan());
        }
    }
    let path = dir.path().join("inf.npy");
    let data = Dataset::from_vec(vec![f16::ONE, f16::INFINITY], 2, 1).unwrap();
    write(&path, data.view(), None).unwrap();
    assert!(matches!(
        read::<f16>(&path, &ReadOptions::default()),
        Err(weft_core::Error::NonFinite { row: 1, col: 0, .. })
    ));
}

#[test]
fn row_ranges_are_checked_and_can_be_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.fbin");
    write(
        &path,
        Dataset::from_fn(4, 2, |r, _| r as f32).unwrap().view(),
        None,
    )
    .unwrap();
    let file = VectorFile::open(&path, &ReadOptions::default()).unwrap();
    assert_eq!(file.read_rows::<f32>(2..2).unwrap().rows(), 0);
    assert!(file.read_rows::<f32>(3..5).is_err());
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = file.read_rows::<f32>(3..1);
    assert!(reversed.is_err());
    assert_eq!(file.read_rows::<f32>(3..4).unwrap().row(0), &[3.0, 3.0]);
    let any = file.read_rows_any(1..3).unwrap();
    assert!(matches!(any, AnyDataset::F32(_)));
}
