//! The exit status of every subcommand, in one table (also in `hlosim --help` and the
//! README), so that scripts and CI can tell "the tool found something" from "the tool could
//! not do its job".

use std::process::ExitCode;

/// What a command's exit status means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: the command did what was asked and found nothing at error level.
    Ok,
    /// 1: the command ran to the end and found a divergence beyond tolerance (`diff`) or an
    /// error-level device finding (`diff`, `run --mode device`).
    Finding,
    /// 2: bad input, a bad option, or a resource limit (memory budget, iteration limit, a
    /// file that cannot be written); nothing the user gave is overwritten.
    BadInput,
    /// 130: interrupted by SIGINT (Ctrl-C). The process removes any temporary output and
    /// ends by the signal, which the shell reports as 128 + 2 = 130 (SIGTERM: 143).
    Interrupted,
}

impl Exit {
    /// The numeric status.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Finding => 1,
            Exit::BadInput => 2,
            Exit::Interrupted => 130,
        }
    }

    /// `Finding` when `found` holds, else `Ok`.
    pub const fn finding_if(found: bool) -> Exit {
        if found {
            Exit::Finding
        } else {
            Exit::Ok
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
    }
}

/// The table as `hlosim --help` prints it.
pub const TABLE: &str = "\
Exit status (every subcommand):
  0    ok
  1    a finding or divergence at error level (diff; run --mode device)
  2    bad input, bad option or a resource limit (memory budget, iteration limit, output
       that cannot be written); no input file is ever overwritten
  130  interrupted (Ctrl-C): temporary outputs are removed and no partial file is left";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_documented_table() {
        for e in [Exit::Ok, Exit::Finding, Exit::BadInput, Exit::Interrupted] {
            let line = format!("  {:<4} ", e.code());
            assert!(TABLE.contains(&line), "{e:?} missing from the table");
        }
        assert_eq!(Exit::finding_if(true).code(), 1);
        assert_eq!(Exit::finding_if(false).code(), 0);
    }
}
