//! Pictures: `hlosim lut sweep --plot` writes a well-formed SVG with one line per dtype and the
//! table's breakpoints marked; `hlosim diff --html` writes one well-formed, self-contained
//! page with the named sections. Both are parsed here as XML.

use crate::common::cli::{hlosim, s, scratch_dir, stderr, stdout};

/// Parses `text` as XML (the page's `<!DOCTYPE html>` allowed).
fn parse(text: &str) -> roxmltree::Document<'_> {
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    roxmltree::Document::parse_with_options(text, opts)
        .unwrap_or_else(|e| panic!("not well-formed: {e}\n{}", &text[..text.len().min(2000)]))
}

/// The text of every `<text>` element.
fn texts<'a>(doc: &'a roxmltree::Document<'_>) -> Vec<&'a str> {
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect()
}

#[test]
fn lut_sweep_plot_is_an_svg_with_a_line_per_dtype_and_the_breakpoints() {
    let dir = scratch_dir("pictures", "plot", "");
    let svg_path = dir.join("err.svg");
    let o = hlosim(&[
        "lut",
        "sweep",
        "--function",
        "gelu",
        "--dtype",
        "bf16,f16,f32",
        "--points",
        "20000",
        "--quiet",
        "--plot",
        s(&svg_path),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // One report per dtype on stdout.
    let out = stdout(&o);
    for d in ["[bf16]", "[f16]", "[f32]"] {
        assert!(out.contains(d), "{d} missing:\n{out}");
    }
    let text = std::fs::read_to_string(&svg_path).unwrap();
    let doc = parse(&text);
    assert!(doc.root_element().has_tag_name("svg"));
    let t = texts(&doc);
    for want in [
        "gelu: table error against x",
        "largest error (ULP)",
        "largest absolute error",
        "bf16",
        "f16",
        "f32",
    ] {
        assert!(
            t.iter().any(|x| x.contains(want)),
            "no text {want:?} in {t:?}"
        );
    }
    // Octave labels on the signed log2 axis.
    assert!(t.iter().any(|x| x.starts_with("2^")), "{t:?}");
    assert!(t.iter().any(|x| x.starts_with("-2^")), "{t:?}");
    // Breakpoints: the bundled gelu table has hundreds of buckets; each panel draws a rug
    // tick per bucket start, so there are more lines than buckets.
    let lines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") || n.has_tag_name("line"))
        .count();
    assert!(lines > 400, "{lines} lines");
    // Never over the --table file.
    let table = dir.join("t.json");
    std::fs::copy("models/pwp/trainium/gelu.json", &table).unwrap();
    let before = std::fs::read(&table).unwrap();
    let o = hlosim(&[
        "lut",
        "sweep",
        "--function",
        "gelu",
        "--dtype",
        "bf16",
        "--table",
        s(&table),
        "--plot",
        s(&table),
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(std::fs::read(&table).unwrap(), before);
}

#[test]
fn diff_html_is_one_well_formed_page_with_every_section() {
    let dir = scratch_dir("pictures", "html", "");
    let page = dir.join("report.html");
    let o = hlosim(&[
        "diff",
        "tests/fixtures/diff/totalorder.hlo",
        "--edge-fraction",
        "0.5",
        "--html",
        s(&page),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(
        !text.contains("<script") && !text.contains("href=") && !text.contains("src="),
        "self-contained"
    );
    let doc = parse(&text);
    let section = |id: &str| {
        doc.descendants()
            .find(|n| n.attribute("id") == Some(id))
            .unwrap_or_else(|| panic!("no element with id {id}"))
    };
    let all_text = |n: roxmltree::Node<'_, '_>| {
        n.descendants()
            .filter_map(|d| d.text())
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(all_text(section("summary")).contains("FAIL"));
    assert!(all_text(section("summary")).contains("legalize-compare"));
    let div = all_text(section("first-divergence"));
    assert!(div.contains("lt") && div.contains("compare"), "{div}");
    // One histogram (an inline SVG) per output: the module returns (pred[512], f32[512]).
    for id in ["histogram-d0-out0", "histogram-d0-out1"] {
        assert!(
            section(id).descendants().any(|n| n.has_tag_name("svg")),
            "{id}"
        );
    }
    assert!(all_text(section("findings")).len() > 4);
    let timeline = section("timeline");
    assert!(
        timeline
            .descendants()
            .filter(|n| n.has_tag_name("rect"))
            .count()
            >= 3,
        "a bar per scheduled slice"
    );
    assert!(all_text(timeline).contains("µs"));

    // A passing diff: PASS, and nothing diverges.
    let page2 = dir.join("pass.html");
    let o = hlosim(&[
        "diff",
        "tests/fixtures/diff/activations.hlo",
        "--html",
        s(&page2),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text2 = std::fs::read_to_string(&page2).unwrap();
    let doc2 = parse(&text2);
    let summary = doc2
        .descendants()
        .find(|n| n.attribute("id") == Some("summary"))
        .unwrap();
    assert!(summary.descendants().any(|n| n.text() == Some("PASS")));

    // Never over an input.
    let m = dir.join("m.hlo");
    std::fs::copy("tests/fixtures/diff/activations.hlo", &m).unwrap();
    let before = std::fs::read(&m).unwrap();
    let o = hlosim(&["diff", s(&m), "--html", s(&m)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(std::fs::read(&m).unwrap(), before);
}
