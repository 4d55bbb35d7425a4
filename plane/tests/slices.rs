//! Every slice equals a naive fold over the rows, under random writes,
//! snapshots, restores and faults.

mod common;

use common::*;
use pleroma_plane::{Plane, PlaneError};
use proptest::collection::vec;
use proptest::prelude::*;

fn scenario() -> impl Strategy<Value = (Shape, Vec<Op>)> {
    shape().prop_flat_map(|s| (Just(s), vec(op(s.nd, s.domain), 1..80)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn slice_equals_naive_fold((s, ops) in scenario()) {
        let mut plane = Plane::new(config(s.nd, s.cap));
        let mut rows: Vec<Row> = Vec::new();
        let mut snaps = Vec::new();
        for op in ops {
            let faulted = plane.fault().is_some();
            match op {
                Op::Insert(r) => match plane.insert(&r.dims, &r.ms) {
                    Ok(()) if !faulted => rows.push(r),
                    Ok(()) => {}
                    Err(e) => {
                        prop_assert!(matches!(e, PlaneError::CapExceeded { .. }), "{e}");
                        prop_assert!(plane.fault().is_some());
                    }
                },
                Op::Delete(i) if !rows.is_empty() && !faulted => {
                    let r = rows.remove(i.index(rows.len()));
                    plane.delete(&r.dims, &r.ms).unwrap();
                }
                Op::Update(i, new) if !rows.is_empty() && !faulted => {
                    let old = rows.remove(i.index(rows.len()));
                    match plane.update(&old.dims, &old.ms, &new.dims, &new.ms) {
                        Ok(()) => rows.push(new),
                        Err(e) => prop_assert!(matches!(e, PlaneError::CapExceeded { .. }), "{e}"),
                    }
                }
                Op::Snapshot => snaps.push((plane.snapshot(), rows.clone())),
                Op::Restore(i) if !snaps.is_empty() => {
                    let (snap, r) = &snaps[i.index(snaps.len())];
                    plane.restore(snap);
                    rows = r.clone();
                }
                Op::Query(q) => assert_same(&plane, &rows, &q),
                _ => {}
            }
            plane.validate().unwrap();
            if plane.fault().is_none() {
                prop_assert_eq!(plane.rows(), rows.len() as i64);
            }
        }
        for (snap, r) in &snaps {
            assert_same(snap.plane(), r, &dump_query(s.nd));
        }
    }
}
