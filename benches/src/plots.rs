//! The plots, as SVG and PNG (plotters): QPS-recall Pareto curves per dataset (log QPS), build
//! time vs graph recall, build time vs n.
//!
//! Text needs a TrueType font. plotters' `ttf` feature would link fontconfig and freetype,
//! which the GPU machine may lack, so the `ab_glyph` feature (pure Rust) is used with a font
//! file found at run time: `$WEFT_BENCH_FONT`, else a list of common system paths (DejaVu,
//! Liberation, Noto, FreeFont). `cargo xtask device-pack` copies the font it finds into the
//! pack. Without any font the plots are not drawn and the report says so.

use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use plotters::coord::Shift;
use plotters::coord::ranged1d::AsRangedCoord;
use plotters::prelude::*;

use crate::pareto::frontier;
use crate::report::{by_dataset, curve, file_stem, label};
use crate::schema::Record;

/// The family name the font is registered under.
const FAMILY: &str = "sans-serif";

/// Font files tried when `$WEFT_BENCH_FONT` is not set.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
];

/// The font file the plots will use, if any.
pub fn find_font() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("WEFT_BENCH_FONT") {
        let p = PathBuf::from(p);
        return p.exists().then_some(p);
    }
    FONT_PATHS.iter().map(PathBuf::from).find(|p| p.exists())
}

/// Registers the font found by [`find_font`] (once per process).
pub fn init_font() -> Result<PathBuf> {
    static DONE: std::sync::OnceLock<std::result::Result<PathBuf, String>> =
        std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let path = find_font().ok_or(
            "no TrueType font found: set WEFT_BENCH_FONT to a .ttf file (e.g. DejaVuSans.ttf)",
        )?;
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font(FAMILY, FontStyle::Normal, bytes)
            .map_err(|_| format!("{} is not a usable TrueType font", path.display()))?;
        Ok(path)
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

type DrawResult<E> = std::result::Result<(), DrawingAreaErrorKind<E>>;

/// Draws with `draw` into `<dir>/<stem>.svg` and `<dir>/<stem>.png`.
macro_rules! both {
    ($dir:expr, $stem:expr, $size:expr, $draw:expr) => {{
        let svg = $dir.join(format!("{}.svg", $stem));
        let png = $dir.join(format!("{}.png", $stem));
        {
            let root = SVGBackend::new(&svg, $size).into_drawing_area();
            $draw(&root).map_err(|e| anyhow!("{}: {e:?}", svg.display()))?;
            root.present()
                .map_err(|e| anyhow!("{}: {e:?}", svg.display()))?;
        }
        {
            let root = BitMapBackend::new(&png, $size).into_drawing_area();
            $draw(&root).map_err(|e| anyhow!("{}: {e:?}", png.display()))?;
            root.present()
                .map_err(|e| anyhow!("{}: {e:?}", png.display()))?;
        }
        vec![svg, png]
    }};
}

/// `1.2M`, `35k`, `120`, `0.5` for axis labels.
fn compact(v: f64) -> String {
    let short = |x: f64, unit: &str| {
        let t = format!("{x:.3}");
        format!("{}{unit}", t.trim_end_matches('0').trim_end_matches('.'))
    };
    let a = v.abs();
    if a >= 1e6 {
        short(v / 1e6, "M")
    } else if a >= 1e3 {
        short(v / 1e3, "k")
    } else if a >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Point labels placed to the left of the point (recall sits near the right edge).
fn left_label() -> TextStyle<'static> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    TextStyle::from((FAMILY, 11).into_font()).pos(Pos::new(HPos::Right, VPos::Bottom))
}

fn color(i: usize) -> RGBColor {
    const C: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    C[i % C.len()]
}

/// Bounds of positive values for a log axis, padded.
fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    if !lo.is_finite() {
        return (0.1, 10.0);
    }
    (lo / 1.5, hi * 1.5)
}

/// The chart [`frame`] returns.
type FrameResult<'a, DB, X, Y> = std::result::Result<
    ChartContext<
        'a,
        DB,
        Cartesian2d<<X as AsRangedCoord>::CoordDescType, <Y as AsRangedCoord>::CoordDescType>,
    >,
    DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>,
>;

/// A chart with the common caption, margins and label areas, over the coordinates `x` by `y`.
fn frame<'a, DB: DrawingBackend, X: AsRangedCoord, Y: AsRangedCoord>(
    root: &'a DrawingArea<DB, Shift>,
    caption: &str,
    x: X,
    y: Y,
) -> FrameResult<'a, DB, X, Y> {
    ChartBuilder::on(root)
        .caption(caption, (FAMILY, 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(75)
        .build_cartesian_2d(x, y)
}

/// Draws the legend box of `chart` at `position`.
fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> DrawResult<DB::ErrorType> {
    chart
        .configure_series_labels()
        .label_font((FAMILY, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(position)
        .draw()
}

fn pareto<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    name: &str,
    runs: &[&Record],
) -> DrawResult<DB::ErrorType> {
    root.fill(&WHITE)?;
    let curves: Vec<(String, Vec<(f64, f64)>)> = runs
        .iter()
        .map(|r| (label(r), curve(r, None)))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    let xmin = curves
        .iter()
        .flat_map(|(_, c)| c.iter().map(|p| p.0))
        .fold(1.0f64, f64::min);
    let xmin = ((xmin * 10.0).floor() / 10.0).clamp(0.0, 0.9);
    let (ylo, yhi) = log_range(curves.iter().flat_map(|(_, c)| c.iter().map(|p| p.1)));
    let batch = runs
        .iter()
        .flat_map(|r| r.sweep.iter().map(|p| p.batch))
        .max()
        .unwrap_or(0);
    let mut chart = frame(
        root,
        &format!("{name}: QPS vs recall@10 (batch {batch}; Pareto frontier, all points)"),
        xmin..1.0f64,
        (ylo..yhi).log_scale(),
    )?;
    chart
        .configure_mesh()
        .x_desc("recall@10")
        .y_desc("queries per second (log)")
        .y_label_formatter(&|v| compact(*v))
        .label_style((FAMILY, 13))
        .draw()?;
    for (i, (lab, pts)) in curves.iter().enumerate() {
        let c = color(i);
        let f: Vec<(f64, f64)> = frontier(pts).into_iter().map(|j| pts[j]).collect();
        chart
            .draw_series(LineSeries::new(f, c.stroke_width(2)))?
            .label(lab.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
    }
    legend(&mut chart, SeriesLabelPosition::LowerLeft)
}

/// (label, dataset, n, graph recall@10, build median s) of every successful build.
fn builds(records: &[Record]) -> Vec<(String, String, usize, Option<f64>, f64)> {
    records
        .iter()
        .filter_map(|r| {
            let b = r.build.as_ref()?;
            Some((
                label(r),
                r.dataset.name.clone(),
                r.dataset.n,
                r.graph.as_ref().map(|g| g.recall_at_10),
                b.median_s,
            ))
        })
        .collect()
}

fn labels(b: &[(String, String, usize, Option<f64>, f64)]) -> Vec<String> {
    let mut l: Vec<String> = b.iter().map(|x| x.0.clone()).collect();
    l.sort();
    l.dedup();
    l
}

fn build_vs_recall<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    records: &[Record],
) -> DrawResult<DB::ErrorType> {
    root.fill(&WHITE)?;
    let b: Vec<_> = builds(records)
        .into_iter()
        .filter(|x| x.3.is_some())
        .collect();
    let (ylo, yhi) = log_range(b.iter().map(|x| x.4));
    let xmin = b.iter().filter_map(|x| x.3).fold(1.0f64, f64::min);
    let xmin = ((xmin * 10.0).floor() / 10.0).clamp(0.0, 0.9);
    let mut chart = frame(
        root,
        "build time vs graph recall@10 (label: dataset)",
        xmin..1.0f64,
        (ylo..yhi).log_scale(),
    )?;
    chart
        .configure_mesh()
        .x_desc("graph recall@10")
        .y_desc("build seconds (median, log)")
        .y_label_formatter(&|v| compact(*v))
        .label_style((FAMILY, 13))
        .draw()?;
    for (i, lab) in labels(&b).iter().enumerate() {
        let c = color(i);
        let pts: Vec<_> = b.iter().filter(|x| &x.0 == lab).collect();
        chart
            .draw_series(pts.iter().map(|x| {
                EmptyElement::at((x.3.unwrap_or(0.0), x.4))
                    + Circle::new((0, 0), 4, c.filled())
                    + Text::new(x.1.clone(), (-6, -6), left_label())
            }))?
            .label(lab.as_str())
            .legend(move |(x, y)| Circle::new((x + 8, y), 4, c.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

fn build_vs_n<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    records: &[Record],
) -> DrawResult<DB::ErrorType> {
    root.fill(&WHITE)?;
    let b = builds(records);
    let (ylo, yhi) = log_range(b.iter().map(|x| x.4));
    let (xlo, xhi) = log_range(b.iter().map(|x| x.2 as f64));
    let mut chart = frame(
        root,
        "build time vs n (all datasets; label: dataset)",
        (xlo..xhi).log_scale(),
        (ylo..yhi).log_scale(),
    )?;
    chart
        .configure_mesh()
        .x_desc("base vectors n (log)")
        .x_label_formatter(&|v| compact(*v))
        .y_desc("build seconds (median, log)")
        .y_label_formatter(&|v| compact(*v))
        .label_style((FAMILY, 13))
        .draw()?;
    for (i, lab) in labels(&b).iter().enumerate() {
        let c = color(i);
        let mut pts: Vec<_> = b.iter().filter(|x| &x.0 == lab).collect();
        pts.sort_by_key(|x| x.2);
        chart.draw_series(LineSeries::new(
            pts.iter().map(|x| (x.2 as f64, x.4)),
            c.stroke_width(1),
        ))?;
        chart
            .draw_series(pts.iter().map(|x| {
                EmptyElement::at((x.2 as f64, x.4))
                    + Circle::new((0, 0), 4, c.filled())
                    + Text::new(x.1.clone(), (6, -6), (FAMILY, 11))
            }))?
            .label(lab.as_str())
            .legend(move |(x, y)| Circle::new((x + 8, y), 4, c.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

/// Writes every plot of `records` under `dir` and returns the files written.
pub fn write_all(records: &[Record], dir: &Path) -> Result<Vec<PathBuf>> {
    init_font()?;
    std::fs::create_dir_all(dir)?;
    let size = (960, 640);
    let mut files = Vec::new();
    for (name, runs) in by_dataset(records) {
        if runs.iter().all(|r| curve(r, None).is_empty()) {
            continue;
        }
        let stem = format!("pareto-{}", file_stem(&name));
        files.extend(both!(dir, stem, size, |root| pareto(root, &name, &runs)));
    }
    files.extend(both!(dir, "build-vs-recall", size, |root| build_vs_recall(
        root, records
    )));
    files.extend(both!(dir, "build-vs-n", size, |root| build_vs_n(
        root, records
    )));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::tests::sample;

    #[test]
    fn plots_are_written_as_svg_and_png() {
        if find_font().is_none() {
            eprintln!("SKIPPED: no TrueType font on this machine (set WEFT_BENCH_FONT)");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut a = sample("weft", "nndescent", &[(0.8, 5000.0), (0.95, 2000.0)]);
        a.graph = Some(crate::schema::GraphQuality {
            recall_at_10: 0.97,
            recall_k: 32,
            recall_at_k: 0.95,
            sample: 100,
            out_degree: [32.0, 32.0, 32.0],
            in_degree: [0.0, 32.0, 90.0],
            unreachable: Some(0),
            scc_count: Some(1),
        });
        let b = sample("hnswlib", "hnsw", &[(0.9, 3000.0)]);
        let files = write_all(&[a, b], dir.path()).unwrap();
        assert_eq!(files.len(), 6);
        for f in files {
            let len = std::fs::metadata(&f).unwrap().len();
            assert!(len > 1000, "{} is {len} bytes", f.display());
        }
        let svg = std::fs::read_to_string(dir.path().join("pareto-tiny.svg")).unwrap();
        assert!(svg.contains("recall@10") && svg.contains("weft nndescent (cpu)"));
    }

    #[test]
    fn axis_labels_are_compact() {
        assert_eq!(compact(1_200_000.0), "1.2M");
        assert_eq!(compact(35_000.0), "35k");
        assert_eq!(compact(120.0), "120");
        assert_eq!(compact(0.5), "0.50");
    }
}
