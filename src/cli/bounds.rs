//! Value parsers that bound the CLI's numeric options, so that an absurd count is a clear
//! usage error (exit 2) naming the option's range instead of an allocation abort or a run
//! that never ends.

/// Parses an integer count in `MIN..=MAX`; the message states the range.
pub fn count<const MIN: usize, const MAX: usize>(s: &str) -> Result<usize, String> {
    let v: u128 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{}' is not a whole number", hlosim::io::excerpt(s)))?;
    if v < MIN as u128 || v > MAX as u128 {
        return Err(format!("{v} is outside the accepted range {MIN}..={MAX}"));
    }
    Ok(v as usize)
}

/// Parses a fraction in [0, 1] (NaN is rejected).
pub fn fraction(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{}' is not a number", hlosim::io::excerpt(s)))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is outside the accepted range 0 to 1"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_fractions_are_bounded() {
        assert_eq!(count::<1, 10>("10"), Ok(10));
        assert_eq!(
            count::<1, 10>("18446744073709551615").unwrap_err(),
            "18446744073709551615 is outside the accepted range 1..=10"
        );
        assert_eq!(
            count::<1, 10>("0").unwrap_err(),
            "0 is outside the accepted range 1..=10"
        );
        assert!(count::<1, 10>("-1")
            .unwrap_err()
            .contains("not a whole number"));
        // Beyond u128: still a clear message, not a panic.
        assert!(count::<1, 10>(&"9".repeat(60)).is_err());
        assert_eq!(fraction("0.5"), Ok(0.5));
        assert!(fraction("NaN").is_err());
        assert!(fraction("1.5").unwrap_err().contains("0 to 1"));
    }
}
