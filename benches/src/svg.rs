//! The chart of a run: one group of horizontal bars per query, one bar per
//! arm (warm median, log-scale milliseconds), written as plain SVG text.

use std::fmt::Write;

use crate::harness::Report;

fn colour(arm: &str) -> &'static str {
    match arm {
        "sqlite" => "#4c78a8",
        "engine" => "#f58518",
        "plane" => "#54a24b",
        "duckdb" => "#b279a2",
        _ => "#888888",
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The SVG for `report`, bars in the order of `queries` (names).
pub fn chart(report: &Report, queries: &[String]) -> String {
    let arms = &report.arms;
    let times: Vec<f64> = report
        .cells
        .iter()
        .map(|c| c.warm_ms)
        .filter(|t| t.is_finite() && *t > 0.0)
        .collect();
    let lo = times
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .max(1e-4);
    let hi = times.iter().copied().fold(0.0, f64::max).max(lo * 10.0);
    let (e0, e1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let (label_w, plot_w, bar_h, gap, top) = (230.0, 560.0, 9.0, 8.0, 56.0);
    let group_h = bar_h * arms.len() as f64 + gap;
    let height = top + group_h * queries.len() as f64 + 30.0;
    let width = label_w + plot_w + 70.0;
    let x = |ms: f64| {
        label_w + (ms.max(10f64.powi(e0)).log10() - e0 as f64) / (e1 - e0) as f64 * plot_w
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="18" font-size="14" font-weight="bold">{} — {} rows, warm median ms (log scale), commit {}, {}</text>"#,
        esc(&report.workload),
        report.rows,
        esc(&report.commit),
        esc(&report.date)
    );
    for (i, a) in arms.iter().enumerate() {
        let lx = 10.0 + i as f64 * 90.0;
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="28" width="12" height="10" fill="{}"/>"#,
            colour(a)
        );
        let _ = writeln!(s, r#"<text x="{}" y="37">{}</text>"#, lx + 16.0, esc(a));
    }
    for e in e0..=e1 {
        let tx = x(10f64.powi(e));
        let label = if e >= 0 {
            format!("{}", 10f64.powi(e))
        } else {
            format!("{:.*}", (-e) as usize, 10f64.powi(e))
        };
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.1}" y1="{}" x2="{tx:.1}" y2="{}" stroke="#ddd"/><text x="{tx:.1}" y="{}" text-anchor="middle">{label}</text>"##,
            top - 4.0,
            height - 26.0,
            height - 12.0
        );
    }
    for (qi, q) in queries.iter().enumerate() {
        let gy = top + qi as f64 * group_h;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            label_w - 6.0,
            gy + bar_h * arms.len() as f64 / 2.0 + 4.0,
            esc(q)
        );
        for (ai, a) in arms.iter().enumerate() {
            let Some(c) = report.cells.iter().find(|c| &c.query == q && &c.arm == a) else {
                continue;
            };
            if !(c.warm_ms.is_finite() && c.warm_ms > 0.0) {
                continue;
            }
            let y = gy + ai as f64 * bar_h;
            let w = (x(c.warm_ms) - label_w).max(1.0);
            let _ = writeln!(
                s,
                r#"<rect x="{label_w}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{}"><title>{} {}: {:.4} ms</title></rect>"#,
                bar_h - 1.0,
                colour(a),
                esc(q),
                esc(a),
                c.warm_ms
            );
        }
    }
    s.push_str("</svg>\n");
    s
}
