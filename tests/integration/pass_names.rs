//! Every pass name the registry knows round-trips through the command line: `--passes NAME`
//! runs exactly that pass (reported under that name by `--time-passes`), `--skip NAME`
//! skips it, and the one registered pass without behaviour (`stub`) is refused to run but
//! accepted as a name to skip. The names are written out here by hand from hlo-opt's
//! registration list, so a pass renamed in one place only fails this test.

use crate::common::cli::{hlosim, stderr};

const MODULE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/models/hlo/bert_mlp_gelu.hlo");

/// hlo-opt's registered names in registration order, and whether each one runs.
const NAMES: [(&str, bool); 6] = [
    ("tuple-simplifier", true),
    ("call-inliner", true),
    ("dce", true),
    ("stub", false),
    ("legalize-intrinsics", true),
    ("legalize-compare", true),
];

#[test]
fn the_registry_lists_the_names_in_order() {
    let names: Vec<_> = hlosim::passes::REGISTRY.iter().map(|p| p.name).collect();
    let want: Vec<_> = NAMES.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, want);
    let o = hlosim(&["opt", "--list"]);
    assert!(o.status.success());
    let listed = String::from_utf8_lossy(&o.stdout);
    for (n, _) in NAMES {
        assert!(listed.contains(n), "--list lacks {n}:\n{listed}");
    }
}

#[test]
fn every_name_runs_with_passes_and_is_skipped_with_skip() {
    for (name, runs) in NAMES {
        let o = hlosim(&["opt", MODULE, "--passes", name, "--time-passes"]);
        let err = stderr(&o);
        if runs {
            assert!(o.status.success(), "--passes {name}: {err}");
            let line = err.lines().next().unwrap_or_default();
            let fields: Vec<_> = line.split_whitespace().collect();
            assert_eq!(fields[..2], ["01", name], "{err}");
            assert!(
                line.ends_with("changed") && !line.ends_with("skipped"),
                "{err}"
            );
        } else {
            assert!(!o.status.success(), "--passes {name} ran");
            assert!(err.contains("no known behaviour"), "{err}");
        }
        let o = hlosim(&[
            "opt",
            MODULE,
            "--passes",
            name,
            "--skip",
            name,
            "--time-passes",
        ]);
        let err = stderr(&o);
        assert!(o.status.success(), "--skip {name}: {err}");
        let line = err.lines().next().unwrap_or_default();
        assert!(
            line.starts_with("01") && line.contains(name) && line.ends_with("skipped"),
            "--skip {name}: {err}"
        );
    }
}

#[test]
fn an_unknown_name_is_an_error_listing_the_known_ones() {
    for flag in ["--passes", "--skip"] {
        let mut args = vec!["opt", MODULE];
        if flag == "--skip" {
            args.extend(["--passes", "dce"]);
        }
        args.extend([flag, "legalise-compare"]);
        let o = hlosim(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{flag}: {err}");
        assert!(err.contains("unknown pass 'legalise-compare'"), "{err}");
        assert!(err.contains("legalize-compare"), "{err}");
    }
}
