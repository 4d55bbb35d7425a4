-- Pleroma parity reproduction
-- answers differ
--   class L route engine: SELECT lk.grp, TOTAL(e.m2), COUNT(lk.w), SUM(CASE WHEN lk.w > 0 THEN e.m2 END), COUNT(lk.w) FROM t e JOIN lk ON e.d0 = lk.kt GROUP BY lk.grp ORDER BY lk.grp LIMIT 2
--   pleroma: Ok((["grp", "TOTAL(e.m2)", "COUNT(lk.w)", "SUM(CASE WHEN lk.w > 0 THEN e.m2 END)", "COUNT(lk.w)"], [[Text("a"), Real(-6.795720703748293e18), Integer(10), Null, Integer(10)], [Text("b"), Real(-2.44250944639512e19), Integer(19), Integer(-6795720703748293068), Integer(19)]]))
--   sqlite:  Err("integer overflow")
-- Replay: cargo run --release -p pleroma-parity -- --replay <this file>

-- @exec
PRAGMA foreign_keys = ON;
-- @exec
CREATE TABLE parent(pid INTEGER PRIMARY KEY, w INTEGER, tag TEXT);
-- @exec
INSERT INTO parent(pid, w, tag) VALUES (1, -15, 'g1'), (2, -5, 'g2'), (3, 5, 'g0'), (4, 15, 'g1'), (5, 25, 'g2'), (6, 35, 'g0');
-- @exec
CREATE TABLE t(id INTEGER PRIMARY KEY, note TEXT, d0 INTEGER, x INTEGER, d1 TEXT, m0 INTEGER, p INTEGER REFERENCES parent(pid) ON DELETE CASCADE, m1 INTEGER, u INTEGER UNIQUE, m2 INTEGER);
-- @exec
CREATE TABLE aux(k, v INTEGER);
-- @exec
CREATE TABLE lk(k, grp TEXT, w INTEGER, kt TEXT);
-- @exec
INSERT INTO lk(k, grp, w) VALUES (-3000, 'a', -2), (-2993, 'b', -1), (-2986, 'c', 0), (-3000, 'b', 1), (NULL, 'a', 1), ('c', 'b', 2), ('ab', 'c', 3), (NULL, 'b', 2), (NULL, 'n', 1), ('no such key', 'z', 0);
-- @exec
UPDATE lk SET kt = k;
-- @exec
CREATE TRIGGER aux_ins AFTER INSERT ON aux BEGIN INSERT INTO t(d0, m0, note) VALUES (NEW.k, NEW.v, 'trg'); END;
-- @exec
CREATE TRIGGER aux_del AFTER DELETE ON aux BEGIN DELETE FROM t WHERE note = 'trg' AND m0 IS OLD.v; END;
-- @exec
CREATE TRIGGER boom_abort BEFORE INSERT ON t WHEN NEW.note = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END;
-- @exec
CREATE TRIGGER boom_fail BEFORE UPDATE ON t WHEN NEW.note = 'boom-fail' BEGIN SELECT RAISE(FAIL, 'boom fail'); END;
-- @exec
CREATE TRIGGER boom_rollback BEFORE UPDATE ON t WHEN NEW.note = 'boom-rollback' BEGIN SELECT RAISE(ROLLBACK, 'boom rollback'); END;
-- @exec
CREATE TRIGGER t_echo AFTER INSERT ON t WHEN NEW.note = 'echo' BEGIN UPDATE t SET m0 = 1, note = 'echoed' WHERE id = NEW.id; END;
-- @exec
PRAGMA journal_mode = WAL;
-- @exec
INSERT INTO t(note, d0, x, d1, m0, p, m1, u, m2) VALUES ('n1', -3000, 78, 'c', 777, 4, 42144, 1, -6095796534901240158), ('n4', -1348, 58, 'ab', 728, NULL, 45927, 2, 7026808374347328394), ('n3', -2986, 33, 2, 150, NULL, 18670, 3, -3326338532404932184), ('n2', -1005, 35, 'ab', -583, 1, -54772, 4, 3891260760330256880), ('n1', -2552, 94, 'c', -543, NULL, 99845, 5, 3329486456775946477), ('n7', -2986, 22, 'v24', 499, 3, 33973, 6, 6191414653634539310), ('n7', 661, 18, NULL, 503, 5, 60372, 7, -1446393590318181412), ('n1', -3000, 68, NULL, 799, 5, -81311, 8, 7918562749692615408), ('n0', 136, 28, 'A', 897, 6, 21324, 9, 5314195058308615579), ('n2', 1452, 45, 'c', 205, NULL, -8079, 10, -643238768430890111), ('n3', -3000, 52, NULL, -692, 5, -84275, 11, 5798329458478897722), ('n0', 4749, 66, 'ab', 518, 6, -45317, 12, -1562408860904048480), ('n8', -1404, 93, 'v24', 148, NULL, 81386, 13, -7123762967336721354), ('n4', 1501, 11, 'A', -733, NULL, 41186, 14, -709225260578389990), ('n0', 2243, 17, 2, -325, NULL, NULL, 15, -2708386601318810955), ('n5', -2139, 53, NULL, -891, 2, 21585, 16, -6950064881722440731), ('n1', -2993, 81, 'ab', -22, 1, -77605, 17, NULL), ('n7', -2510, 35, 'ab', NULL, 3, -62620, 18, 794975933928852875), ('n7', 3699, 88, 'c', NULL, 5, -66459, 19, 4337783626985028671), ('n9', 1606, 49, 'ab', NULL, 2, 26227, 20, 4007240003796739424), ('n8', -2993, 89, NULL, -287, 1, 38077, 21, -7053426109534890833), ('n7', -2986, 66, 'ab', -170, 3, -95045, 22, 545629974580935728), ('n1', 2313, 49, 'ab', -539, 3, -61429, 23, -6350149178748236986), ('n9', 2642, 41, 'c', -64, 6, -65727, 24, -3642217592499417284), ('n5', -2993, 0, NULL, -841, 6, 4502, 25, -1679618000428916161), ('n9', 920, 49, 'ab', 459, NULL, 45390, 26, -5607078401310979575), ('n2', -3000, 46, 2, 120, 5, -1897, 27, -7382097365549149152), ('n7', 1823, 55, NULL, -557, NULL, -63742, 28, -1084541930717707085), ('n7', 3664, 61, 'ab', -688, 3, 19098, 29, -6124377124569904555), ('n7', -2986, 76, NULL, 721, 1, 7569, 30, 1305458432384314622), ('n0', -3000, 46, 42, -238, NULL, 99976, 31, -4308543917491228651), ('n9', -2993, 10, 'ab', -984, 5, -57428, 32, -4388409277988029037), ('n1', -2993, 82, 2, 623, 3, -49204, 33, -523179578840900211), ('n6', -2993, 20, 'c', -675, NULL, -62196, 34, 3621108920228121664), ('n8', -3000, 15, 'c', 644, NULL, -54817, 35, 6724682934636839841), ('n8', -2986, 75, 'ab', -61, 2, 68813, 36, 7830205037084450710), ('n5', -3000, 42, 'ab', -859, NULL, NULL, 37, 72753310091460861), ('n6', -3000, 93, 'c', -343, 3, 16324, 38, -6591082028069059770), ('n0', -2986, 78, NULL, 296, NULL, -51473, 39, -386555004080991978), ('n2', -2986, 25, 'ab', 38, 5, -96889, 40, -3924709580351078511), ('n3', -3000, 33, 'c', -581, 3, -21531, 41, -2932529310637429169), ('n1', 927, 57, NULL, 921, 4, -13066, 42, 3131605281455464390), ('n9', -3000, 46, 'v24', -562, 3, 58406, 43, NULL), ('n8', -2993, 33, 'c', -637, 3, 14681, 44, -2709970054650893447), ('n2', -2986, 38, NULL, 56, NULL, 79787, 45, -1295206376150932914), ('n7', -382, 44, 'c', -507, 1, NULL, 46, -1445162061705625033), ('n7', 1256, 92, NULL, 804, NULL, 32966, 47, 3126983376120623540), ('n2', -2986, 10, 'c', 194, 5, -25221, 48, -4589897894192068571), ('n4', -2986, 17, 42, -325, 1, -52752, 49, -2131341051117880037), ('n5', -2986, 75, 'c', -394, NULL, -96311, 50, -116743930918518518), ('n7', -1334, 6, 42, -547, 6, -7954, 51, NULL), ('n0', -2993, 28, 42, -920, 3, -13798, 52, -5201010135141502566), ('n9', 3895, 44, 2, -420, NULL, -97446, 53, -2863006957462709977), ('n5', 213, 20, 'ab', 14, 2, NULL, 54, -2499508687226092318), ('n7', -2076, 98, 'v24', NULL, NULL, -52730, 55, NULL), ('n1', 1326, 70, NULL, -938, NULL, 38239, 56, 5222967865117146860), ('n0', -2986, 92, 'ab', -312, 1, 19891, 57, 3739502478868079596), ('n1', -2993, 30, NULL, 626, 1, 81918, 58, 305130476154104057), ('n6', -319, 0, NULL, -914, NULL, 78263, 59, -2168677637319730622), ('n6', 521, 87, 'c', -896, 6, 26225, 60, -3462496792471460596);
-- @pleroma PRAGMA pleroma_attach('t', 'd0, d1', 'm0, m1, m2')
-- @pleroma PRAGMA pleroma_attach('t', 'd1', 'm0, m1, m2', 'p2')
-- @check Out total
SELECT last_insert_rowid(), changes(), total_changes();
-- @pleroma PRAGMA pleroma_limb('t', 'p', 'parent', 'pid')
-- @check Out total
SELECT last_insert_rowid(), changes(), total_changes();
-- @check L total
SELECT lk.grp, TOTAL(e.m2), COUNT(lk.w), SUM(CASE WHEN lk.w > 0 THEN e.m2 END), COUNT(lk.w) FROM t e JOIN lk ON e.d0 = lk.kt GROUP BY lk.grp ORDER BY lk.grp LIMIT 2;
-- @check L unordered
SELECT l.grp, COUNT(t.m1), COUNT(t.m1), COUNT(*), TOTAL(t.m1) FROM t CROSS JOIN lk AS l WHERE t.d1 = l.k GROUP BY l.grp;
-- @check L unordered
SELECT lk.grp, e.d1, COUNT(DISTINCT e.d1) FROM t e JOIN lk ON e.d1 = lk.k WHERE lk.w > 1 GROUP BY lk.grp, e.d1;
-- @exec
REPLACE INTO t(note, d0, x, d1, m0, p, m1, u, m2) VALUES ('n5', -3000, 55, 'c', 796, 5, -37545, 54, 2360502921917438631);
-- @check L total
SELECT l.grp, t.d1, SUM(t.m2) FROM t CROSS JOIN lk AS l WHERE l.k = t.d0 AND l.w > 2 GROUP BY l.grp, t.d1 ORDER BY l.grp, t.d1;
