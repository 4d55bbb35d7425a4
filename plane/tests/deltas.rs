//! Deltas: a delete undoes an insert, re-packing keeps every total, and the
//! borrowed encoder agrees with the owned one.

mod common;

use common::*;
use pleroma_plane::{DimRef, Plane};
use proptest::collection::vec;
use proptest::prelude::*;

fn rows() -> impl Strategy<Value = (usize, Vec<Row>, Vec<Row>)> {
    (1usize..=4, prop_oneof![Just(3i64), Just(10), Just(60)]).prop_flat_map(|(nd, domain)| {
        (
            Just(nd),
            vec(row(nd, domain), 0..40),
            vec(row(nd, domain), 0..40),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn delete_undoes_insert((nd, base, extra) in rows(), seed in any::<u64>()) {
        let mut plane = Plane::new(config(nd, 1024));
        for r in &base {
            plane.insert(&r.dims, &r.ms).unwrap();
        }
        let (n, cells) = (plane.rows(), plane.cells());
        for r in &extra {
            plane.insert(&r.dims, &r.ms).unwrap();
        }
        // Delete the extra rows in a shuffled order.
        let mut order: Vec<usize> = (0..extra.len()).collect();
        let mut x = seed | 1;
        for i in (1..order.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
        for i in order {
            plane.delete(&extra[i].dims, &extra[i].ms).unwrap();
            plane.validate().unwrap();
        }
        prop_assert_eq!((plane.rows(), plane.cells()), (n, cells));
        assert_same(&plane, &base, &dump_query(nd));
        assert_same(&plane, &base, &counts_query(nd));
    }

    #[test]
    fn repack_preserves_totals((nd, rows, _) in rows()) {
        let mut plane = Plane::new(config(nd, 1024));
        let mut held = Vec::new();
        for r in rows {
            let bits = plane.joint_bits();
            plane.insert(&r.dims, &r.ms).unwrap();
            held.push(r);
            plane.validate().unwrap();
            if plane.joint_bits() != bits {
                assert_same(&plane, &held, &counts_query(nd));
            }
        }
        let per_dim: u32 = (0..nd).map(|d| plane.dim_bits(d)).sum();
        prop_assert_eq!(per_dim, plane.joint_bits());
    }

    #[test]
    fn encode_ref_equals_encode((nd, rows, _) in rows()) {
        let mut owned = Plane::new(config(nd, 1024));
        let mut borrowed = Plane::new(config(nd, 1024));
        for r in &rows {
            let refs: Vec<DimRef<'_>> = r.dims.iter().map(|v| v.as_ref()).collect();
            let k = owned.encode(&r.dims).unwrap();
            prop_assert_eq!(borrowed.encode_ref(&refs).unwrap(), k);
            prop_assert_eq!(owned.decode(k).iter().enumerate().map(|(d, &c)| owned.dict(d).value(c).clone()).collect::<Vec<_>>(), r.dims.clone());
        }
    }
}
