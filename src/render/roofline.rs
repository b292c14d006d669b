//! The roofline chart of the HTML explain report: an inline SVG (no scripts, no external
//! resources), log-log, arithmetic intensity (FLOP per DRAM byte) against achieved FLOP/s.
//!
//! Roofs come from the profiles' own peaks (`peak_dram_bytes_per_s`, `peak_fp32_flop_per_s`), one
//! pair per device: the median of the explained kernels' peaks on that device (ncu scales peaks by
//! the clock it measured during each launch, so they differ a little from launch to launch). One
//! dot per kernel with a positive arithmetic intensity and achieved FLOP/s, labelled with its rank.

use crate::explain::report::ExplainReport;
use crate::format::si;
use serde::Serialize;
use std::fmt::Write;

/// One device's roofs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Roof {
    pub device: String,
    pub peak_flop_per_s: f64,
    pub peak_dram_bytes_per_s: f64,
    /// Arithmetic intensity where the memory roof meets the compute roof, FLOP/byte.
    pub ridge: f64,
    /// How many kernels' peaks the median was taken over.
    pub kernels: usize,
}

/// One kernel placed on the chart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    pub rank: usize,
    pub name: String,
    pub device: String,
    pub arithmetic_intensity: f64,
    pub achieved_flop_per_s: f64,
    pub pct_of_roof: Option<f64>,
}

/// A kernel that could not be placed, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unplaced {
    pub rank: usize,
    pub name: String,
    pub reason: &'static str,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Chart {
    pub roofs: Vec<Roof>,
    pub points: Vec<Point>,
    pub unplaced: Vec<Unplaced>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn positive(x: Option<f64>) -> Option<f64> {
    x.filter(|v| v.is_finite() && *v > 0.0)
}

impl Chart {
    /// Collects roofs and points from the report's kernels (in report order).
    pub fn from_report(report: &ExplainReport) -> Chart {
        let mut chart = Chart::default();
        // Devices in first-seen order.
        let mut devices: Vec<(String, Vec<f64>, Vec<f64>)> = Vec::new();
        for k in &report.kernels {
            let a = &k.analysis;
            let device = a.device_name.clone().unwrap_or_else(|| "GPU".to_string());
            let rf = &a.facts.roofline;
            if let (Some(pf), Some(pb)) =
                (positive(rf.peak_fp32_flop_per_s.as_ref().map(|f| f.value)), positive(rf.peak_dram_bytes_per_s.as_ref().map(|f| f.value)))
            {
                match devices.iter_mut().find(|d| d.0 == device) {
                    Some(d) => {
                        d.1.push(pf);
                        d.2.push(pb);
                    }
                    None => devices.push((device.clone(), vec![pf], vec![pb])),
                }
            }
            let ai = rf.arithmetic_intensity.as_ref().map(|f| f.value);
            let ach = rf.achieved_flop_per_s.as_ref().map(|f| f.value);
            let name = k.kernel.name.clone();
            match (ai, ach) {
                (None, _) | (_, None) => {
                    chart.unplaced.push(Unplaced { rank: k.rank, name, reason: "the profile has no FLOP or DRAM byte counters for it" })
                }
                (Some(ai), Some(ach)) => match (positive(Some(ai)), positive(Some(ach))) {
                    (Some(ai), Some(ach)) => chart.points.push(Point {
                        rank: k.rank,
                        name,
                        device,
                        arithmetic_intensity: ai,
                        achieved_flop_per_s: ach,
                        pct_of_roof: rf.pct_of_roof.as_ref().map(|f| f.value),
                    }),
                    _ => chart.unplaced.push(Unplaced { rank: k.rank, name, reason: "no floating-point operations were counted" }),
                },
            }
        }
        chart.roofs = devices
            .into_iter()
            .map(|(device, pf, pb)| {
                let kernels = pf.len();
                let (pf, pb) = (median(pf), median(pb));
                Roof { device, peak_flop_per_s: pf, peak_dram_bytes_per_s: pb, ridge: pf / pb, kernels }
            })
            .collect();
        chart
    }

    /// The chart as an inline `<svg>` element, or `None` when no kernel has peaks to draw roofs from.
    pub fn svg(&self) -> Option<String> {
        if self.roofs.is_empty() {
            return None;
        }
        Some(draw(self))
    }
}

/// Escapes text for SVG/HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Decade tick label for the intensity axis.
fn decade_label(k: i32) -> String {
    match k {
        0..=4 => format!("1{}", "0".repeat(k as usize)),
        -3..=-1 => format!("0.{}1", "0".repeat((-k - 1) as usize)),
        _ => format!("1e{k}"),
    }
}

const PALETTE: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];

const W: f64 = 760.0;
const PLOT_L: f64 = 78.0;
const PLOT_R: f64 = 740.0;
const PLOT_T: f64 = 16.0;
const PLOT_B: f64 = 396.0;

fn draw(c: &Chart) -> String {
    let axes = Axes::covering(c);
    let legend_rows = c.roofs.len();
    let h = PLOT_B + 58.0 + 18.0 * legend_rows as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="roofline" viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" aria-labelledby="roofline-title"><title id="roofline-title">Roofline: arithmetic intensity (FLOP/byte) against achieved FLOP/s, log-log</title>"#
    );
    s.push_str(r##"<rect x="0" y="0" width="100%" height="100%" fill="#fff"/>"##);
    draw_grid(&mut s, &axes);
    draw_roofs(&mut s, c, &axes);
    draw_points(&mut s, c, &axes);
    draw_legend(&mut s, c);
    s.push_str("</svg>");
    s
}

/// The plot's axis ranges in decades of arithmetic intensity (x) and FLOP/s (y).
struct Axes {
    x_lo: i32,
    x_hi: i32,
    y_lo: i32,
    y_hi: i32,
}

impl Axes {
    /// Ranges covering every point, every roof's ridge and peak.
    fn covering(c: &Chart) -> Axes {
        let mut xs: Vec<f64> = c.points.iter().map(|p| p.arithmetic_intensity).collect();
        xs.extend(c.roofs.iter().map(|r| r.ridge));
        let mut ys: Vec<f64> = c.points.iter().map(|p| p.achieved_flop_per_s).collect();
        ys.extend(c.roofs.iter().map(|r| r.peak_flop_per_s));
        let lg = |v: f64| v.log10();
        let min_x = xs.iter().copied().map(lg).fold(f64::INFINITY, f64::min);
        let max_x = xs.iter().copied().map(lg).fold(f64::NEG_INFINITY, f64::max);
        let min_y = ys.iter().copied().map(lg).fold(f64::INFINITY, f64::min);
        let max_y = ys.iter().copied().map(lg).fold(f64::NEG_INFINITY, f64::max);
        let mut x_lo = (min_x.floor() as i32) - 1;
        let x_hi = (max_x.ceil() as i32 + 1).max(x_lo + 4);
        // Some headroom above the highest roof for its label.
        let y_hi = (max_y + 0.15).ceil() as i32;
        let mut y_lo = (min_y.floor() as i32).min(y_hi - 3);
        // At most 12 decades on either axis, anchored at the top right where the roofs are.
        if x_hi - x_lo > 12 {
            x_lo = x_hi - 12;
        }
        if y_hi - y_lo > 12 {
            y_lo = y_hi - 12;
        }
        Axes { x_lo, x_hi, y_lo, y_hi }
    }

    /// The x pixel of an arithmetic intensity (FLOP/byte).
    fn px(&self, ai: f64) -> f64 {
        let (xl, xh) = (self.x_lo as f64, self.x_hi as f64);
        PLOT_L + (ai.log10() - xl) / (xh - xl) * (PLOT_R - PLOT_L)
    }

    /// The y pixel of a FLOP/s.
    fn py(&self, flop_per_s: f64) -> f64 {
        let (yl, yh) = (self.y_lo as f64, self.y_hi as f64);
        PLOT_B - (flop_per_s.log10() - yl) / (yh - yl) * (PLOT_B - PLOT_T)
    }
}

/// Grid lines and decade ticks, the plot frame and the axis titles.
fn draw_grid(s: &mut String, axes: &Axes) {
    for k in axes.x_lo..=axes.x_hi {
        let x = axes.px(10f64.powi(k));
        let _ = write!(s, r##"<line x1="{x:.1}" y1="{PLOT_T}" x2="{x:.1}" y2="{PLOT_B}" stroke="#e3e3e3"/>"##);
        let _ = write!(
            s,
            r##"<text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#444">{}</text>"##,
            PLOT_B + 15.0,
            decade_label(k)
        );
    }
    for k in axes.y_lo..=axes.y_hi {
        let y = axes.py(10f64.powi(k));
        let _ = write!(s, r##"<line x1="{PLOT_L}" y1="{y:.1}" x2="{PLOT_R}" y2="{y:.1}" stroke="#e3e3e3"/>"##);
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="#444">{}</text>"##,
            PLOT_L - 6.0,
            y + 4.0,
            si(10f64.powi(k))
        );
    }
    let _ = write!(
        s,
        r##"<rect x="{PLOT_L}" y="{PLOT_T}" width="{}" height="{}" fill="none" stroke="#888"/>"##,
        PLOT_R - PLOT_L,
        PLOT_B - PLOT_T
    );
    let _ = write!(
        s,
        r##"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle" fill="#222">Arithmetic intensity (FLOP per DRAM byte)</text>"##,
        (PLOT_L + PLOT_R) / 2.0,
        PLOT_B + 34.0
    );
    let _ = write!(
        s,
        r##"<text x="16" y="{:.1}" font-size="12" text-anchor="middle" fill="#222" transform="rotate(-90 16 {:.1})">Achieved FLOP/s</text>"##,
        (PLOT_T + PLOT_B) / 2.0,
        (PLOT_T + PLOT_B) / 2.0
    );
}

/// Roofs: the memory roof from where it enters the plot to the ridge, then the compute roof.
fn draw_roofs(s: &mut String, c: &Chart, axes: &Axes) {
    let (xl, xh, yl) = (axes.x_lo as f64, axes.x_hi as f64, axes.y_lo as f64);
    let (x_min_v, x_max_v, y_min_v) = (10f64.powf(xl), 10f64.powf(xh), 10f64.powf(yl));
    for (i, r) in c.roofs.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let start = x_min_v.max(y_min_v / r.peak_dram_bytes_per_s);
        let ridge = r.ridge.clamp(x_min_v, x_max_v);
        let (x0, y0) = (axes.px(start), axes.py((start * r.peak_dram_bytes_per_s).max(y_min_v)));
        let (x1, y1) = (axes.px(ridge), axes.py(r.peak_flop_per_s.min(ridge * r.peak_dram_bytes_per_s)));
        let (x2, y2) = (axes.px(x_max_v), axes.py(r.peak_flop_per_s));
        let _ = write!(
            s,
            r#"<polyline points="{x0:.1},{y0:.1} {x1:.1},{y1:.1} {x2:.1},{y2:.1}" fill="none" stroke="{colour}" stroke-width="2"><title>{}: DRAM {}B/s, FP32 {}FLOP/s, ridge at {} FLOP/byte</title></polyline>"#,
            escape(&r.device),
            si(r.peak_dram_bytes_per_s),
            si(r.peak_flop_per_s),
            crate::format::number(r.ridge)
        );
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="{colour}">FP32 peak {}FLOP/s</text>"##,
            PLOT_R - 6.0,
            y2 - 5.0,
            si(r.peak_flop_per_s)
        );
    }
}

/// One dot per kernel in its device's colour, labelled with its rank (drawn at the edge when outside the axes).
fn draw_points(s: &mut String, c: &Chart, axes: &Axes) {
    for p in &c.points {
        let colour = c.roofs.iter().position(|r| r.device == p.device).map(|i| PALETTE[i % PALETTE.len()]).unwrap_or("#555");
        let (x, y) = (axes.px(p.arithmetic_intensity), axes.py(p.achieved_flop_per_s));
        let in_plot = (PLOT_L..=PLOT_R).contains(&x) && (PLOT_T..=PLOT_B).contains(&y);
        let (x, y) = (x.clamp(PLOT_L, PLOT_R), y.clamp(PLOT_T, PLOT_B));
        let roof = p.pct_of_roof.map(|v| format!(", {}% of the roof", crate::format::number(v))).unwrap_or_default();
        let _ = write!(
            s,
            r##"<g class="pt"><title>#{} {}: {} FLOP/byte, {}FLOP/s{}{}</title><circle cx="{x:.1}" cy="{y:.1}" r="5" fill="{colour}" fill-opacity="0.75" stroke="#222" stroke-width="0.8"/><text x="{:.1}" y="{:.1}" font-size="10" fill="#222">{}</text></g>"##,
            p.rank,
            escape(&p.name),
            crate::format::number(p.arithmetic_intensity),
            si(p.achieved_flop_per_s),
            roof,
            if in_plot { "" } else { " (outside the axes, drawn at the edge)" },
            x + 6.0,
            y - 5.0,
            p.rank
        );
    }
}

/// The legend: one row per device.
fn draw_legend(s: &mut String, c: &Chart) {
    for (i, r) in c.roofs.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let y = PLOT_B + 54.0 + 18.0 * i as f64;
        let _ = write!(
            s,
            r#"<line x1="{PLOT_L}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{colour}" stroke-width="2"/>"#,
            y - 4.0,
            PLOT_L + 24.0,
            y - 4.0
        );
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{y:.1}" font-size="11" fill="#222">{}: DRAM {}B/s, FP32 {}FLOP/s (median of {} kernel{})</text>"##,
            PLOT_L + 30.0,
            escape(&r.device),
            si(r.peak_dram_bytes_per_s),
            si(r.peak_flop_per_s),
            r.kernels,
            if r.kernels == 1 { "" } else { "s" }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_and_decade_labels() {
        assert_eq!(escape("a<b&\"c'"), "a&lt;b&amp;&quot;c&#39;");
        assert_eq!(decade_label(-3), "0.001");
        assert_eq!(decade_label(-1), "0.1");
        assert_eq!(decade_label(0), "1");
        assert_eq!(decade_label(3), "1000");
        assert_eq!(decade_label(6), "1e6");
    }

    #[test]
    fn svg_has_roofs_points_and_escapes() {
        let c = Chart {
            roofs: vec![Roof { device: "GPU <1>".into(), peak_flop_per_s: 6e13, peak_dram_bytes_per_s: 4.8e12, ridge: 12.5, kernels: 3 }],
            points: vec![Point {
                rank: 1,
                name: "k<T>&".into(),
                device: "GPU <1>".into(),
                arithmetic_intensity: 0.5,
                achieved_flop_per_s: 3e9,
                pct_of_roof: Some(0.1),
            }],
            unplaced: vec![],
        };
        let s = c.svg().unwrap();
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert!(s.contains("k&lt;T&gt;&amp;") && !s.contains("k<T>"));
        assert!(s.contains("<polyline") && s.contains("<circle"));
        assert!(!s.contains("http"));
        assert!(Chart::default().svg().is_none());
    }
}
