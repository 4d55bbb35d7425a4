//! Snapshots: a restore rewinds the working copy exactly (faults included),
//! and a snapshot never changes while the writer goes on.

mod common;

use std::thread;

use common::*;
use pleroma_plane::{DimValue, MeasureValue, Plane};
use proptest::collection::vec;
use proptest::prelude::*;

fn writes() -> impl Strategy<Value = (Shape, Vec<Row>, Vec<Op>)> {
    shape().prop_flat_map(|s| {
        (
            Just(s),
            vec(row(s.nd, s.domain), 0..30),
            vec(op(s.nd, s.domain), 1..40),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn snapshot_restore_rewinds_exactly((s, before, ops) in writes()) {
        let mut plane = Plane::new(config(s.nd, s.cap));
        let mut rows = Vec::new();
        for r in before {
            if plane.insert(&r.dims, &r.ms).is_ok() && plane.fault().is_none() {
                rows.push(r);
            }
        }
        let snap = plane.snapshot();
        let (fault, n, cells, bits, bytes) = (plane.fault().map(str::to_string), plane.rows(), plane.cells(), plane.joint_bits(), plane.bytes());
        let mut live = rows.clone();
        for op in ops {
            match op {
                Op::Insert(r) => {
                    // A failed insert faults the plane, which then ignores
                    // the deletes below.
                    let _ = plane.insert(&r.dims, &r.ms);
                    live.push(r);
                }
                Op::Delete(i) | Op::Update(i, _) if !live.is_empty() => {
                    let r = live.remove(i.index(live.len()));
                    let _ = plane.delete(&r.dims, &r.ms);
                }
                Op::Query(q) => {
                    // The snapshot answers as it did when taken.
                    assert_same(snap.plane(), &rows, &q);
                }
                _ => {}
            }
            plane.validate().unwrap();
            snap.plane().validate().unwrap();
        }
        plane.restore(&snap);
        plane.validate().unwrap();
        prop_assert_eq!(plane.fault().map(str::to_string), fault);
        prop_assert_eq!((plane.rows(), plane.cells(), plane.joint_bits()), (n, cells, bits));
        prop_assert!(plane.bytes() >= bytes, "only the encoder's cache may have grown");
        assert_same(&plane, &rows, &dump_query(s.nd));
    }
}

#[test]
fn readers_on_other_threads_keep_their_snapshot() {
    let mut plane = Plane::new(config(2, 1024));
    let row = |i: i64| {
        (
            [DimValue::Int(i % 7), DimValue::Int(i % 3)],
            [MeasureValue::Int(i), MeasureValue::Null],
        )
    };
    for i in 0..1000 {
        let (d, m) = row(i);
        plane.insert(&d, &m).unwrap();
    }
    let snap = plane.snapshot();
    let expected = snap.plane().slice(&dump_query(2)).unwrap();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let snap = snap.clone();
            let expected = expected.clone();
            thread::spawn(move || {
                for _ in 0..200 {
                    assert_eq!(snap.plane().slice(&dump_query(2)).unwrap(), expected);
                }
            })
        })
        .collect();
    for i in 1000..5000 {
        let (d, m) = row(i);
        plane.insert(&d, &m).unwrap();
    }
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(plane.rows(), 5000);
    assert_eq!(snap.plane().rows(), 1000);
}
