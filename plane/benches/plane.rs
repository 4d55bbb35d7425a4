//! Plane micro-benchmarks (criterion), the figures in `docs/benchmarks.md`.
//!
//! - `build/10M_rows_3_dims_1_measure`: build from in-memory Arrow arrays
//!   (region: 4 texts, status: 5 texts, month: 24 integers; a 10-bit joint).
//! - `deltas/apply_encoded`: pre-encoded +1/−1 deltas on that plane, one thread.
//! - `slice14/*`: a 14-bit joint (4 × 5 × 12 × 3 × 6 values) with 3 measures
//!   over 1,000,000 rows: a scalar filter on 3 dimensions, a 2-dimension
//!   GROUP BY with a filter, COUNT(DISTINCT) with a filter, MIN/MAX with a filter.
//! - `snapshot/*`: taking a snapshot, restoring one, and a snapshot followed
//!   by the first write (the router's per-statement cost), on the 14-bit plane.
//!
//! Leaves out: sparse joints (over 16 bits) and SQL; the router's benches
//! cover end-to-end queries.
//!
//! Run: `cargo bench -p pleroma-plane --bench plane`

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{ArrayRef, Int64Array, StringArray};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use pleroma_plane::{Agg, JointKey, MeasureValue, Plane, PlaneConfig, Pred, SliceQuery, Truth};

/// A small deterministic generator (xorshift), so every run sees the same data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

fn text_column(rng: &mut Rng, rows: usize, values: &[&str]) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(
        (0..rows).map(|_| values[rng.below(values.len() as u64) as usize]),
    ))
}

fn int_column(rng: &mut Rng, rows: usize, n: u64) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(
        (0..rows).map(|_| rng.below(n) as i64),
    ))
}

/// The invoices table of the seed: region, status, month; amount_cents.
fn invoices(rows: usize) -> (PlaneConfig, Vec<ArrayRef>, Vec<ArrayRef>) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let dims = vec![
        text_column(&mut rng, rows, &["north", "south", "east", "west"]),
        text_column(
            &mut rng,
            rows,
            &["draft", "sent", "paid", "overdue", "void"],
        ),
        int_column(&mut rng, rows, 24),
    ];
    let measures = vec![int_column(&mut rng, rows, 1_000_000)];
    let config = PlaneConfig::new(
        vec!["region".into(), "status".into(), "month".into()],
        vec!["amount_cents".into()],
    );
    (config, dims, measures)
}

/// A 14-bit joint: 4 × 5 × 12 × 3 × 6 values (2 + 3 + 4 + 2 + 3 bits), 3 measures.
fn dashboard(rows: usize) -> Plane {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let dims = [4, 5, 12, 3, 6]
        .iter()
        .map(|&n| int_column(&mut rng, rows, n))
        .collect::<Vec<_>>();
    let measures = (0..3)
        .map(|_| int_column(&mut rng, rows, 100_000))
        .collect::<Vec<_>>();
    let plane = Plane::build_from_arrow(
        PlaneConfig::new(names("d", 5), names("m", 3)),
        &dims,
        &measures,
    )
    .unwrap();
    assert_eq!(plane.joint_bits(), 14);
    plane
}

/// `dim IN (codes)` as a truth table over the dimension's codes.
fn is_in(plane: &Plane, dim: usize, codes: &[usize]) -> Pred {
    let mut truth = vec![Truth::False; plane.dict(dim).len()];
    for &c in codes {
        truth[c] = Truth::True;
    }
    Pred::Leaf { dim, truth }
}

fn build(c: &mut Criterion) {
    let (config, dims, measures) = invoices(10_000_000);
    let mut g = c.benchmark_group("build");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    g.throughput(Throughput::Elements(10_000_000));
    g.bench_function("10M_rows_3_dims_1_measure", |b| {
        b.iter(|| Plane::build_from_arrow(config.clone(), &dims, &measures).unwrap())
    });
    g.finish();
}

fn deltas(c: &mut Criterion) {
    let (config, dims, measures) = invoices(100_000);
    let mut plane = Plane::build_from_arrow(config, &dims, &measures).unwrap();
    let mut rng = Rng(7);
    let cells = 1u64 << plane.joint_bits();
    // Pairs of an insert and a later delete of the same row keep the plane
    // steady however many iterations criterion runs.
    let n = 1_000_000;
    let mut ds: Vec<(JointKey, i64, [MeasureValue; 1])> = Vec::with_capacity(n);
    let mut keys = Vec::new();
    while keys.len() < n / 2 {
        let k = rng.below(cells);
        if plane
            .decode(k)
            .iter()
            .enumerate()
            .all(|(d, &code)| (code as usize) < plane.dict(d).len())
        {
            keys.push((k, MeasureValue::Int(rng.below(1_000_000) as i64)));
        }
    }
    ds.extend(keys.iter().map(|&(k, m)| (k, 1, [m])));
    ds.extend(keys.iter().map(|&(k, m)| (k, -1, [m])));
    let mut g = c.benchmark_group("deltas");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("apply_encoded", |b| {
        b.iter(|| {
            for (k, w, m) in &ds {
                plane.apply_encoded(*k, *w, m).unwrap();
            }
        })
    });
    g.finish();
    plane.validate().unwrap();
}

fn slices(c: &mut Criterion) {
    let plane = dashboard(1_000_000);
    let scalar = SliceQuery {
        filter: Pred::And(vec![
            is_in(&plane, 0, &[1]),
            is_in(&plane, 1, &[2]),
            is_in(&plane, 2, &[3, 4, 5]),
        ]),
        group_by: vec![],
        aggs: vec![Agg::CountStar, Agg::Sum(0), Agg::Sum(1), Agg::Count(2)],
    };
    let group_by = SliceQuery {
        filter: is_in(&plane, 2, &[0, 1, 2, 3, 4, 5]),
        group_by: vec![0, 1],
        aggs: vec![Agg::CountStar, Agg::Sum(0), Agg::Sum(1)],
    };
    let distinct = SliceQuery {
        filter: is_in(&plane, 0, &[2]),
        group_by: vec![],
        aggs: vec![Agg::CountDistinct(2)],
    };
    let min_max = SliceQuery {
        filter: Pred::And(vec![is_in(&plane, 1, &[0]), is_in(&plane, 3, &[1])]),
        group_by: vec![],
        aggs: vec![Agg::Min(0), Agg::Max(0)],
    };
    let mut g = c.benchmark_group("slice14");
    g.sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for (name, q) in [
        ("scalar_filter_3_dims", &scalar),
        ("group_by_2_dims_filtered", &group_by),
        ("count_distinct_filtered", &distinct),
        ("min_max_filtered", &min_max),
    ] {
        let visited = plane.slice(q).unwrap().cells_visited;
        g.bench_function(format!("{name} ({visited} cells)"), |b| {
            b.iter(|| plane.slice(black_box(q)).unwrap())
        });
    }
    g.finish();
}

fn snapshots(c: &mut Criterion) {
    let mut plane = dashboard(1_000_000);
    let bytes = plane.bytes();
    let key = plane
        .encode(&[0.into(), 0.into(), 0.into(), 0.into(), 0.into()])
        .unwrap();
    let row = [
        MeasureValue::Int(1),
        MeasureValue::Int(2),
        MeasureValue::Int(3),
    ];
    let mut g = c.benchmark_group(format!("snapshot ({} KiB plane)", bytes / 1024));
    g.sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    g.bench_function("take", |b| b.iter(|| black_box(plane.snapshot())));
    let snap = plane.snapshot();
    g.bench_function("restore", |b| {
        b.iter_batched_ref(
            || plane.clone(),
            |p| p.restore(black_box(&snap)),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("take_then_first_write", |b| {
        b.iter_batched_ref(
            || plane.clone(),
            |p| {
                let s = p.snapshot();
                p.apply_encoded(key, 1, &row).unwrap();
                s
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
    drop(snap);
    plane.apply_encoded(key, 1, &row).unwrap();
}

criterion_group!(benches, build, deltas, slices, snapshots);
criterion_main!(benches);
