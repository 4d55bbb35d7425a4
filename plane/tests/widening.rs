//! Wide measures: a cell keeps 64-bit sums until a sum leaves `i64`, then
//! keeps the exact `i128` form aside; every answer stays exact throughout,
//! and `validate` checks that a measure is wide exactly when it must be.

mod common;

use common::*;
use pleroma_plane::{AggValue, DimValue, MeasureValue, Plane};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;
use std::sync::{Mutex, MutexGuard};

/// Mostly values at the ends of `i64`, so a few rows in a cell take its
/// sums past `i64` either way, and deletes bring them back.
fn big() -> impl Strategy<Value = MeasureValue> {
    prop_oneof![
        1 => Just(MeasureValue::Null),
        2 => (-40i64..40).prop_map(MeasureValue::Int),
        6 => prop_oneof![
            Just(i64::MAX),
            Just(i64::MIN),
            Just(i64::MAX - 1),
            Just(i64::MIN + 1),
            Just(1 << 62),
            Just(-(1 << 62)),
            Just((1 << 62) + 1),
        ]
        .prop_map(MeasureValue::Int),
    ]
}

/// A row in a small domain (many rows per cell).
fn big_row(nd: usize) -> impl Strategy<Value = Row> {
    (vec((0i64..3).prop_map(DimValue::Int), nd), big(), big()).prop_map(|(dims, a, b)| Row {
        dims,
        ms: vec![a, b],
    })
}

/// Rows that give every dimension enough values to push a joint of 2 or 3
/// dimensions past 16 bits (sparse storage), one cell each.
fn spread(nd: usize) -> Vec<Row> {
    let n = if nd == 2 { 300 } else { 70 };
    (0..n)
        .map(|i| Row {
            dims: vec![DimValue::Int(100 + i); nd],
            ms: vec![MeasureValue::Int(i % 5), MeasureValue::Null],
        })
        .collect()
}

/// Dimensions, and whether the plane is made sparse first.
fn shape() -> impl Strategy<Value = (usize, bool)> {
    (1usize..=3, any::<bool>()).prop_map(|(nd, sparse)| (nd, sparse && nd >= 2))
}

fn plane_of(nd: usize, rows: &[Row]) -> Plane {
    let mut p = Plane::new(config(nd, 1024));
    for r in rows {
        p.insert(&r.dims, &r.ms).unwrap();
    }
    p
}

fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut x = seed | 1;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

/// Whether some cell's sums left `i64` (so the run widened something).
fn any_wide(plane: &Plane, nd: usize) -> bool {
    let r = plane.slice(&dump_query(nd)).unwrap();
    r.groups.iter().flat_map(|g| &g.values).any(|v| {
        matches!(*v, AggValue::Sum { pos, neg, .. } if pos > i64::MAX as i128 || neg < i64::MIN as i128)
    })
}

/// The laws run one case at a time: the mutation test below switches the
/// plane's (process-wide) mutation on while it holds this.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn cut(nd: usize, rows: Vec<Row>) -> Vec<Row> {
    rows.into_iter()
        .map(|mut r| {
            r.dims.truncate(nd);
            r
        })
        .collect()
}

/// The laws, one function each, so the mutation test can run them too.
mod laws {
    use super::*;

    /// Sums that cross `i64` upwards (positive) and downwards (negative) are
    /// exact at every step, and deleting the rows again brings every cell back
    /// under: `validate` refuses a wide measure that fits.
    pub(super) fn sums_past_i64_either_way_stay_exact_and_narrow_again_under_deletes(
        (nd, sparse): (usize, bool),
        big: Vec<Row>,
        seed: u64,
    ) -> Result<(), TestCaseError> {
        let big = cut(nd, big);
        let mut rows = if sparse { spread(nd) } else { Vec::new() };
        let mut plane = plane_of(nd, &rows);
        for r in &big {
            plane.insert(&r.dims, &r.ms).unwrap();
            rows.push(r.clone());
            plane.validate().unwrap();
            assert_same(&plane, &rows, &counts_query(nd));
        }
        assert_same(&plane, &rows, &dump_query(nd));
        for i in shuffled(big.len(), seed) {
            plane.delete(&big[i].dims, &big[i].ms).unwrap();
            let at = rows.iter().rposition(|r| *r == big[i]).unwrap();
            rows.remove(at);
            plane.validate().unwrap();
            assert_same(&plane, &rows, &dump_query(nd));
        }
        prop_assert!(!any_wide(&plane, nd));
        Ok(())
    }

    /// Merging planes whose cells are wide (or become wide only in the sum)
    /// gives exactly the plane of the union of their rows.
    pub(super) fn merge_of_wide_cells_equals_build_of_union(
        (nd, sparse): (usize, bool),
        a: Vec<Row>,
        b: Vec<Row>,
        deletes: Vec<Index>,
    ) -> Result<(), TestCaseError> {
        let mut a = cut(nd, a);
        let mut left = plane_of(nd, &a);
        // Deletes on the left side narrow some of its cells again.
        for i in deletes {
            if !a.is_empty() {
                let r = a.remove(i.index(a.len()));
                left.delete(&r.dims, &r.ms).unwrap();
            }
        }
        // The right side is sparse when asked: the merge re-packs the left.
        let mut rb = if sparse { spread(nd) } else { Vec::new() };
        rb.extend(cut(nd, b));
        let right = plane_of(nd, &rb);
        left.merge(&right).unwrap();
        left.validate().unwrap();
        let union: Vec<Row> = a.iter().chain(&rb).cloned().collect();
        assert_same(&left, &union, &dump_query(nd));
        let mut other = plane_of(nd, &rb);
        other.merge(&plane_of(nd, &a)).unwrap();
        other.validate().unwrap();
        assert_same(&other, &union, &dump_query(nd));
        Ok(())
    }

    /// A snapshot taken before widening answers as it did when taken while the
    /// writer widens and narrows cells, and a restore rewinds to it exactly.
    pub(super) fn snapshot_restore_rewinds_across_widening(
        (nd, sparse): (usize, bool),
        before: Vec<Row>,
        after: Vec<Row>,
        deletes: Vec<Index>,
    ) -> Result<(), TestCaseError> {
        let mut rows = if sparse { spread(nd) } else { Vec::new() };
        rows.extend(cut(nd, before));
        let mut plane = plane_of(nd, &rows);
        let snap = plane.snapshot();
        let mut live = rows.clone();
        let mut deletes = deletes.into_iter();
        for r in cut(nd, after) {
            plane.insert(&r.dims, &r.ms).unwrap();
            live.push(r);
            if let Some(i) = deletes.next() {
                let r = live.remove(i.index(live.len()));
                plane.delete(&r.dims, &r.ms).unwrap();
            }
            plane.validate().unwrap();
            snap.plane().validate().unwrap();
        }
        assert_same(&plane, &live, &dump_query(nd));
        assert_same(snap.plane(), &rows, &dump_query(nd));
        plane.restore(&snap);
        plane.validate().unwrap();
        assert_same(&plane, &rows, &dump_query(nd));
        Ok(())
    }

    /// Emptying a sparse cell moves the shard's last cell into its place; that
    /// cell's wide sums move with it (its neighbours stay exact).
    pub(super) fn emptying_a_sparse_cell_keeps_its_neighbours_wide_sums(
        nd: usize,
        big: Vec<Row>,
        seed: u64,
    ) -> Result<(), TestCaseError> {
        // The spread cells come first in their shards, the wide ones last.
        let mut rows = spread(nd);
        let n = rows.len();
        rows.extend(cut(nd, big));
        let mut plane = plane_of(nd, &rows);
        for i in shuffled(n, seed) {
            plane.delete(&rows[i].dims, &rows[i].ms).unwrap();
            plane.validate().unwrap();
        }
        assert_same(&plane, &rows[n..], &dump_query(nd));
        Ok(())
    }
}

fn rows_of(n: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Row>> {
    vec(big_row(3), n)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sums_past_i64_either_way_stay_exact_and_narrow_again_under_deletes(
        s in shape(), big in rows_of(1..40), seed in any::<u64>(),
    ) {
        let _g = serial();
        laws::sums_past_i64_either_way_stay_exact_and_narrow_again_under_deletes(s, big, seed)?;
    }

    #[test]
    fn merge_of_wide_cells_equals_build_of_union(
        s in shape(), a in rows_of(0..30), b in rows_of(0..30), deletes in vec(any::<Index>(), 0..10),
    ) {
        let _g = serial();
        laws::merge_of_wide_cells_equals_build_of_union(s, a, b, deletes)?;
    }

    #[test]
    fn snapshot_restore_rewinds_across_widening(
        s in shape(), before in rows_of(0..20), after in rows_of(1..30), deletes in vec(any::<Index>(), 0..30),
    ) {
        let _g = serial();
        laws::snapshot_restore_rewinds_across_widening(s, before, after, deletes)?;
    }

    #[test]
    fn emptying_a_sparse_cell_keeps_its_neighbours_wide_sums(
        nd in 2usize..=3, big in rows_of(1..40), seed in any::<u64>(),
    ) {
        let _g = serial();
        laws::emptying_a_sparse_cell_keeps_its_neighbours_wide_sums(nd, big, seed)?;
    }
}

/// Each law, run under the plane's widening mutation, finds a failing case.
#[cfg(feature = "mutations")]
#[test]
fn the_widening_laws_catch_dropped_carry_on_widening() {
    use pleroma_plane::mutation;
    use proptest::test_runner::{Config, TestRunner};

    let _g = serial();
    let config = Config {
        cases: 256,
        failure_persistence: None,
        max_shrink_iters: 0,
        ..Config::default()
    };
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    mutation::set(Some("dropped_carry_on_widening"));
    let caught = [
        TestRunner::new(config.clone())
            .run(&(shape(), rows_of(1..40), any::<u64>()), |(s, b, x)| {
                laws::sums_past_i64_either_way_stay_exact_and_narrow_again_under_deletes(s, b, x)
            })
            .is_err(),
        TestRunner::new(config.clone())
            .run(
                &(
                    shape(),
                    rows_of(0..30),
                    rows_of(0..30),
                    vec(any::<Index>(), 0..10),
                ),
                |(s, a, b, d)| laws::merge_of_wide_cells_equals_build_of_union(s, a, b, d),
            )
            .is_err(),
        TestRunner::new(config.clone())
            .run(
                &(
                    shape(),
                    rows_of(0..20),
                    rows_of(1..30),
                    vec(any::<Index>(), 0..30),
                ),
                |(s, a, b, d)| laws::snapshot_restore_rewinds_across_widening(s, a, b, d),
            )
            .is_err(),
        TestRunner::new(config)
            .run(&(2usize..=3, rows_of(1..40), any::<u64>()), |(nd, b, x)| {
                laws::emptying_a_sparse_cell_keeps_its_neighbours_wide_sums(nd, b, x)
            })
            .is_err(),
    ];
    mutation::set(None);
    std::panic::set_hook(quiet);
    assert_eq!(caught, [true; 4], "each law is red under the mutation");
}

/// A wide measure costs its entry in the block's wide table, and nothing
/// once deletes bring it back under `i64`.
#[test]
fn a_wide_measure_costs_its_entry_and_nothing_once_back_under() {
    let _g = serial();
    let mut p = plane_of(1, &[]);
    let row = |v: i64| {
        (
            [DimValue::Int(0)],
            [MeasureValue::Int(v), MeasureValue::Null],
        )
    };
    let (d, m) = row(i64::MAX);
    p.insert(&d, &m).unwrap();
    let narrow = p.bytes();
    p.insert(&d, &m).unwrap();
    let wide = p.bytes();
    assert!(wide > narrow, "{wide} > {narrow}");
    p.validate().unwrap();
    let (d2, m2) = row(i64::MIN);
    for _ in 0..3 {
        p.insert(&d2, &m2).unwrap();
    }
    assert_eq!(p.bytes(), wide, "still one wide measure");
    let v = p.slice(&counts_query(1)).unwrap().groups[0].values[2];
    assert_eq!(
        v,
        AggValue::Sum {
            nn: 5,
            pos: 2 * i64::MAX as i128,
            neg: 3 * i64::MIN as i128
        }
    );
    assert_eq!(
        v.exact_sum(),
        Some((2 * i64::MAX as i128 + 3 * i64::MIN as i128, true))
    );
    p.delete(&d, &m).unwrap();
    p.delete(&d2, &m2).unwrap();
    p.delete(&d2, &m2).unwrap();
    p.validate().unwrap();
    assert_eq!(p.bytes(), narrow, "back under i64: no wide table");
}
