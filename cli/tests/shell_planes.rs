//! `.planes` lists the planes and `.explain SQL` tells the route a query
//! would take and why, as boxes whatever the output mode.

mod common;

use common::shell;

#[test]
fn planes_and_explain_show_the_plane_and_the_routes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let script = "\
.planes
CREATE TABLE s(region TEXT, amount INTEGER);
INSERT INTO s VALUES ('eu', 5), ('us', 7), ('eu', 1);
PRAGMA pleroma_attach('s', 'region', 'amount');
.planes
.explain SELECT SUM(amount) FROM s WHERE region = 'eu';
.explain SELECT region FROM s WHERE amount > 1
";
    let r = shell(&db, script);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let out = &r.stdout;
    let (none, rest) = out.split_once('\n').unwrap();
    assert_eq!(none, "(none)", "no planes yet");
    let boxes: Vec<&str> = rest.split_inclusive("┘\n").collect();
    assert_eq!(boxes.len(), 3, "{out}");
    assert!(
        boxes[0].contains("│ table ") && boxes[0].contains("│ s "),
        "{}",
        boxes[0]
    );
    assert!(
        boxes[1].contains("│ route ") && boxes[1].contains("│ plane "),
        "{}",
        boxes[1]
    );
    assert!(
        boxes[2].contains("│ engine ") && boxes[2].contains("amount"),
        "{}",
        boxes[2]
    );
}
