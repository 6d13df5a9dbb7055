//! CPU probe of the locality-aware shard schedule: how many true k-NN pairs (k = 64) of a
//! synthetic preset lie in one shard or in a merged shard pair, for `m = 0, 1, ...` partner
//! shards. An upper bound of what the out-of-memory build's recall can reach with
//! `shard_schedule = {"nearest": m}`, without a GPU.
//!
//! `partition_probe [preset] [n] [shards]` (default `sift 200000 9`): the shard capacity is
//! `ceil(n / shards)` (as a contiguous plan of `shards` shards); the truth is brute force for
//! 500 evenly spaced points.

use std::collections::HashSet;
use std::time::Instant;

use weft_io::Preset;
use weft_nndescent::partition::{fine_clusters, locality_partition, nearest_pairs};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let preset: Preset = args.get(1).map_or("sift", String::as_str).parse()?;
    let n: usize = args.get(2).map_or(Ok(200_000), |v| v.parse())?;
    let shards: usize = args.get(3).map_or(Ok(9), |v| v.parse())?;
    let k = 64;
    let data = preset.generator(42)?.base(n)?;
    let view = data.view();
    let metric = preset.metric();
    let cap = n.div_ceil(shards);
    let t = Instant::now();
    let p = locality_partition(view, metric, cap, k + 1, fine_clusters(n, cap), 1)?;
    let s = p.len();
    println!(
        "{preset} n={n}: {s} shards in {:.2} s, sizes {:?}",
        t.elapsed().as_secs_f64(),
        p.shards.iter().map(Vec::len).collect::<Vec<_>>()
    );
    let mut shard = vec![0usize; n];
    for (c, ids) in p.shards.iter().enumerate() {
        for &v in ids {
            shard[v as usize] = c;
        }
    }
    let dist = metric.distance_fn::<f32>();
    let q = 500;
    let truth: Vec<(usize, Vec<usize>)> = (0..q)
        .map(|i| {
            let v = i * (n / q);
            let mut d: Vec<(f32, usize)> = (0..n)
                .filter(|&u| u != v)
                .map(|u| (dist.eval(view.row(v), view.row(u)), u))
                .collect();
            d.select_nth_unstable_by(k, |a, b| a.0.total_cmp(&b.0));
            (v, d[..k].iter().map(|x| x.1).collect())
        })
        .collect();
    for m in 0..s {
        let pairs: HashSet<(usize, usize)> = if m == 0 {
            HashSet::new()
        } else {
            nearest_pairs(&p, m).into_iter().collect()
        };
        let (mut hit, mut all) = (0usize, 0usize);
        for (v, row) in &truth {
            for &u in row {
                let (a, b) = (shard[*v], shard[u]);
                all += 1;
                hit += usize::from(a == b || pairs.contains(&(a.min(b), a.max(b))));
            }
        }
        println!(
            "m={m}: {} merges, true {k}-NN pairs covered {:.4}",
            pairs.len(),
            hit as f64 / all as f64
        );
        if hit == all {
            break;
        }
    }
    Ok(())
}
