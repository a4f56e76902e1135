//! `--seeds RANGE`: which input seeds a sweep runs, written as a half-open range `A..B`, an
//! inclusive range `A..=B` or a list `1,5,9`. Ranges follow Rust's spelling so `0..3` means
//! the three seeds 0, 1, 2, as everywhere else in the tool's documentation.

/// The most seeds one sweep may name: each is a full diff of every module on every machine,
/// so more is a typing mistake (`0..1000000000`), not a plan; the limit keeps the case list
/// from exhausting memory before the first case runs.
pub const MAX_SEEDS: u64 = 100_000;

/// The seeds of a sweep, in the order given, without repeats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seeds(pub Vec<u64>);

/// Parses `--seeds`: `A..B` (B excluded), `A..=B` (B included) or a comma-separated list; a
/// single number is a list of one. Errors name the offending piece and the accepted forms.
pub fn parse_seeds(text: &str) -> Result<Seeds, String> {
    const FORMS: &str = "expected A..B (B excluded), A..=B (B included) or a list like 1,5,9";
    let t = text.trim();
    if let Some((a, b)) = t.split_once("..") {
        let (inclusive, b) = match b.strip_prefix('=') {
            Some(b) => (true, b),
            None => (false, b),
        };
        let (lo, hi) = (seed(a, FORMS)?, seed(b, FORMS)?);
        let count = (u128::from(hi) + u128::from(inclusive)).saturating_sub(u128::from(lo));
        if count == 0 {
            return Err(format!(
                "'{t}' is an empty range ({FORMS}; A..B needs B > A, A..=B needs B >= A)"
            ));
        }
        if count > u128::from(MAX_SEEDS) {
            return Err(format!("'{t}' names {count} seeds; at most {MAX_SEEDS}"));
        }
        return Ok(Seeds((lo..=lo + (count as u64 - 1)).collect()));
    }
    let mut seeds = Vec::new();
    for piece in t.split(',') {
        let s = seed(piece, FORMS)?;
        if seeds.contains(&s) {
            return Err(format!("seed {s} is listed twice in '{t}'"));
        }
        if seeds.len() as u64 == MAX_SEEDS {
            return Err(format!("'{t}' names more than {MAX_SEEDS} seeds"));
        }
        seeds.push(s);
    }
    Ok(Seeds(seeds))
}

/// One seed, a whole number in `0..2^64`.
fn seed(piece: &str, forms: &str) -> Result<u64, String> {
    let p = piece.trim();
    p.parse::<u64>().map_err(|_| {
        if p.is_empty() {
            format!("a seed is missing ({forms})")
        } else {
            format!("'{p}' is not a seed, a whole number from 0 to 2^64-1 ({forms})")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(t: &str) -> Vec<u64> {
        parse_seeds(t).unwrap_or_else(|e| panic!("{t}: {e}")).0
    }

    #[test]
    fn half_open_ranges_exclude_the_end() {
        assert_eq!(ok("0..3"), [0, 1, 2]);
        assert_eq!(ok(" 5..6 "), [5]);
    }

    #[test]
    fn inclusive_ranges_include_the_end() {
        assert_eq!(ok("0..=3"), [0, 1, 2, 3]);
        assert_eq!(ok("7..=7"), [7]);
        assert_eq!(
            ok("18446744073709551614..=18446744073709551615"),
            [u64::MAX - 1, u64::MAX]
        );
    }

    #[test]
    fn lists_keep_their_order() {
        assert_eq!(ok("9,1,5"), [9, 1, 5]);
        assert_eq!(ok("4"), [4]);
        assert_eq!(ok("1, 2"), [1, 2]);
    }

    #[test]
    fn bad_input_says_what_and_the_accepted_forms() {
        for (t, want) in [
            ("3..3", "'3..3' is an empty range"),
            ("4..=3", "'4..=3' is an empty range"),
            ("a..3", "'a' is not a seed"),
            ("0..-1", "'-1' is not a seed"),
            ("1,,2", "a seed is missing"),
            ("", "a seed is missing"),
            ("1,2,1", "seed 1 is listed twice"),
            ("0..1000000", "names 1000000 seeds; at most 100000"),
            ("0..=18446744073709551615", "at most 100000"),
        ] {
            let e = parse_seeds(t).unwrap_err();
            assert!(e.contains(want), "{t}: {e}");
            if !want.contains("twice") && !want.contains("at most") {
                assert!(e.contains("A..B (B excluded), A..=B"), "{t}: {e}");
            }
        }
    }
}
