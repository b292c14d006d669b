//! A small inline SVG per set for the HTML report: each member's time (bars, left axis) and its
//! busiest unit's % of peak (line, right axis, 0-100%; the unit its table row names) against the varying value, in set order.

use crate::sets::KernelSet;

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 240.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 48.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 56.0;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The plot, or `None` when no member has a time.
pub fn svg(set: &KernelSet) -> Option<String> {
    let n = set.members.len();
    let max_ns = set.members.iter().filter_map(|m| m.duration_ns).fold(0.0, f64::max);
    if n == 0 || max_ns <= 0.0 {
        return None;
    }
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let slot = plot_w / n as f64;
    let x_of = |i: usize| LEFT + slot * (i as f64 + 0.5);
    let y_time = |ns: f64| TOP + plot_h * (1.0 - ns / max_ns);
    let y_pct = |p: f64| TOP + plot_h * (1.0 - p.clamp(0.0, 100.0) / 100.0);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"time and busiest unit % per member\">"
    );
    out += &format!("<line x1=\"{LEFT}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/>", TOP + plot_h, LEFT + plot_w, TOP + plot_h);
    out += &format!("<text x=\"4\" y=\"{}\" font-size=\"11\">{}</text>", TOP + 10.0, escape(&crate::format::duration(max_ns)));
    out += &format!("<text x=\"4\" y=\"{}\" font-size=\"11\">time</text>", TOP + plot_h);
    out += &format!("<text x=\"{}\" y=\"{}\" font-size=\"11\">100%</text>", LEFT + plot_w + 4.0, TOP + 10.0);
    out += &format!("<text x=\"{}\" y=\"{}\" font-size=\"11\">unit %</text>", LEFT + plot_w + 4.0, TOP + plot_h);
    let mut line: Vec<String> = Vec::new();
    for (i, m) in set.members.iter().enumerate() {
        if let Some(ns) = m.duration_ns {
            let y = y_time(ns);
            out += &format!(
                "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#7aa6d8\"><title>#{} {}: {}</title></rect>",
                x_of(i) - slot * 0.3,
                slot * 0.6,
                TOP + plot_h - y,
                i + 1,
                escape(&m.value),
                escape(&crate::format::duration(ns))
            );
        }
        if let Some((unit, p)) = m.shown_unit() {
            line.push(format!("{:.1},{:.1}", x_of(i), y_pct(p)));
            out += &format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"#c0392b\"><title>{} {}%</title></circle>",
                x_of(i),
                y_pct(p),
                escape(unit),
                crate::format::number(p)
            );
        }
        let label: String = m.value.chars().take(18).collect();
        out += &format!(
            "<text x=\"{:.1}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">#{} {}</text>",
            x_of(i),
            TOP + plot_h + 14.0,
            i + 1,
            escape(&label)
        );
    }
    if line.len() >= 2 {
        out += &format!("<polyline points=\"{}\" fill=\"none\" stroke=\"#c0392b\" stroke-width=\"1.5\"/>", line.join(" "));
    }
    out += &format!(
        "<text x=\"{LEFT}\" y=\"{}\" font-size=\"11\">bars: time; red: busiest unit's % of peak (hover: which unit); x: {}</text></svg>",
        HEIGHT - 8.0,
        escape(&set.varies.join(", "))
    );
    Some(out)
}
