//! Merging planes adds them up cell by cell, whatever their dictionaries.

mod common;

use common::*;
use pleroma_plane::{Plane, PlaneError};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

fn halves() -> impl Strategy<Value = (usize, Vec<Row>, Vec<Row>, Vec<Index>)> {
    (
        1usize..=4,
        prop_oneof![Just(3i64), Just(10), Just(40), Just(300)],
    )
        .prop_flat_map(|(nd, domain)| {
            (
                Just(nd),
                vec(row(nd, domain), 0..40),
                vec(row(nd, domain), 0..40),
                vec(any::<Index>(), 0..10),
            )
        })
}

fn planes_of(nd: usize, rows: &[Row]) -> Plane {
    let mut p = Plane::new(config(nd, 1024));
    for r in rows {
        p.insert(&r.dims, &r.ms).unwrap();
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn merge_equals_build_of_union((nd, a, b, deletes) in halves()) {
        // The left side also deletes rows, so it carries unknown extrema in.
        let mut left = planes_of(nd, &a);
        let mut kept = a.clone();
        for i in deletes {
            if !kept.is_empty() {
                let r = kept.remove(i.index(kept.len()));
                left.delete(&r.dims, &r.ms).unwrap();
            }
        }
        let right = planes_of(nd, &b);
        let mut rev = b.clone();
        rev.reverse();
        let right_reordered = planes_of(nd, &rev);
        left.merge(&right).unwrap();
        left.validate().unwrap();
        let union: Vec<Row> = kept.iter().chain(&b).cloned().collect();
        let whole = planes_of(nd, &union);
        prop_assert_eq!((left.rows(), left.cells()), (whole.rows(), whole.cells()));
        for m in 0..MEASURES {
            prop_assert_eq!(left.foreign(m), whole.foreign(m));
        }
        assert_same(&left, &union, &dump_query(nd));
        assert_same(&left, &union, &counts_query(nd));
        let mut other = right_reordered.clone();
        other.merge(&planes_of(nd, &kept)).unwrap();
        assert_same(&other, &union, &counts_query(nd));
    }
}

#[test]
fn planes_of_different_definitions_do_not_merge() {
    let mut a = Plane::new(config(2, 1024));
    assert_eq!(
        a.merge(&Plane::new(config(3, 1024))),
        Err(PlaneError::Incompatible)
    );
}

#[test]
fn merging_a_faulted_plane_faults() {
    let mut a = Plane::new(config(1, 1024));
    let mut b = Plane::new(config(1, 1024));
    b.set_fault("bad input".into());
    assert_eq!(
        a.merge(&b),
        Err(PlaneError::OutOfService("bad input".into()))
    );
    assert_eq!(a.fault(), Some("bad input"));
}
