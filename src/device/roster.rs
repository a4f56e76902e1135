//! The activation function-set roster of a target and the set chooser. The engine holds one
//! function set at a time; choosing which set serves each activation decides how many table
//! loads a kernel pays. Two choosers: the compiler's greedy first fit, and an optimal one
//! that minimises loads for the module's activation sequence.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The roster bundled for Trainium (`models/pwp/trainium/act_info.json`).
pub const TRAINIUM_ACT_INFO: &str = include_str!("../../models/pwp/trainium/act_info.json");

/// One function set: its roster index (the id a table load names), name and hero functions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionSet {
    pub index: usize,
    pub name: String,
    pub heroes: Vec<String>,
}

/// A target's roster: every set, and the cheap residents every set also holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Roster {
    pub target: String,
    #[serde(default)]
    pub source: String,
    /// The compiler allows at most this many distinct sets in one kernel.
    pub max_sets_per_kernel: usize,
    pub residents: Vec<String>,
    /// Function name → the code an activation instruction names.
    pub function_codes: BTreeMap<String, u32>,
    pub sets: Vec<FunctionSet>,
}

/// A table load the plan needs: load `set` before activation number `before`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlannedLoad {
    pub before: usize,
    pub set: usize,
}

/// Which set serves each activation, and the loads that follow from it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SetPlan {
    /// Set index chosen for each activation, in order.
    pub chosen: Vec<usize>,
    pub loads: Vec<PlannedLoad>,
    /// Distinct sets in first-use order.
    pub distinct: Vec<usize>,
}

/// Why a sequence cannot be planned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RosterError {
    /// No set of the roster holds this function.
    #[error("no function set holds '{function}' (activation #{position})")]
    NoSetHolds { function: String, position: usize },
    /// The file is not a valid roster.
    #[error("malformed roster: {0}")]
    Malformed(String),
}

/// How sets are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Chooser {
    /// neuronx-cc's rule: the first set in roster order that holds the function.
    FirstFit,
    /// Fewest loads over the whole sequence (dynamic programming over sets).
    Optimal,
}

impl Roster {
    /// The bundled Trainium roster.
    pub fn trainium() -> Roster {
        Roster::from_json(TRAINIUM_ACT_INFO).expect("bundled roster is valid")
    }

    /// Parses and checks a roster file.
    pub fn from_json(text: &str) -> Result<Roster, RosterError> {
        let r: Roster =
            serde_json::from_str(text).map_err(|e| RosterError::Malformed(e.to_string()))?;
        for (i, s) in r.sets.iter().enumerate() {
            if s.index != i {
                return Err(RosterError::Malformed(format!(
                    "set '{}' has index {} at position {i}",
                    s.name, s.index
                )));
            }
        }
        if r.sets.is_empty() {
            return Err(RosterError::Malformed("no sets".into()));
        }
        if r.max_sets_per_kernel == 0 {
            return Err(RosterError::Malformed(
                "max_sets_per_kernel must be positive".into(),
            ));
        }
        Ok(r)
    }

    /// Whether set `set` holds `function` (as a hero or a resident).
    pub fn holds(&self, set: usize, function: &str) -> bool {
        self.residents.iter().any(|r| r == function)
            || self.sets[set].heroes.iter().any(|h| h == function)
    }

    /// Sets holding `function`, in roster order.
    pub fn sets_holding(&self, function: &str) -> Vec<usize> {
        (0..self.sets.len())
            .filter(|&s| self.holds(s, function))
            .collect()
    }

    /// Plans the sets for an activation sequence. Loads happen only where the chosen set
    /// changes (the compiler hoists loads and drops those whose set is already resident);
    /// the engine starts with no set resident.
    pub fn plan<S: AsRef<str>>(
        &self,
        sequence: &[S],
        chooser: Chooser,
    ) -> Result<SetPlan, RosterError> {
        let candidates: Vec<Vec<usize>> = sequence
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let c = self.sets_holding(f.as_ref());
                if c.is_empty() {
                    Err(RosterError::NoSetHolds {
                        function: f.as_ref().to_string(),
                        position: i,
                    })
                } else {
                    Ok(c)
                }
            })
            .collect::<Result<_, _>>()?;
        let chosen = match chooser {
            Chooser::FirstFit => candidates.iter().map(|c| c[0]).collect(),
            Chooser::Optimal => optimal_choice(&candidates, self.sets.len()),
        };
        Ok(plan_from_choice(chosen))
    }
}

impl SetPlan {
    /// Position (activation index) at which the plan first uses more than `limit` distinct
    /// sets, if it does.
    pub fn first_over_limit(&self, limit: usize) -> Option<usize> {
        let mut seen: Vec<usize> = Vec::new();
        for (i, &s) in self.chosen.iter().enumerate() {
            if !seen.contains(&s) {
                seen.push(s);
                if seen.len() > limit {
                    return Some(i);
                }
            }
        }
        None
    }
}

fn plan_from_choice(chosen: Vec<usize>) -> SetPlan {
    let mut loads = Vec::new();
    let mut distinct = Vec::new();
    let mut resident: Option<usize> = None;
    for (i, &s) in chosen.iter().enumerate() {
        if resident != Some(s) {
            loads.push(PlannedLoad { before: i, set: s });
            resident = Some(s);
        }
        if !distinct.contains(&s) {
            distinct.push(s);
        }
    }
    SetPlan {
        chosen,
        loads,
        distinct,
    }
}

/// Minimum-load choice: `cost[s]` = fewest loads for the prefix ending with `s` resident.
/// Ties prefer staying on the current set, then the lower roster index (deterministic).
fn optimal_choice(candidates: &[Vec<usize>], nsets: usize) -> Vec<usize> {
    const INF: usize = usize::MAX / 2;
    if candidates.is_empty() {
        return Vec::new();
    }
    let n = candidates.len();
    let mut cost = vec![INF; nsets];
    // back[i][s]: the set resident before activation i when s serves activation i.
    let mut back = vec![vec![usize::MAX; nsets]; n];
    for &s in &candidates[0] {
        cost[s] = 1;
    }
    for i in 1..n {
        let (best_prev, best_cost) = cost
            .iter()
            .enumerate()
            .min_by_key(|&(s, &c)| (c, s))
            .map(|(s, &c)| (s, c))
            .unwrap_or((0, INF));
        let mut next = vec![INF; nsets];
        for &s in &candidates[i] {
            let stay = cost[s];
            let switch = best_cost.saturating_add(1);
            if stay <= switch {
                next[s] = stay;
                back[i][s] = s;
            } else {
                next[s] = switch;
                back[i][s] = best_prev;
            }
        }
        cost = next;
    }
    let mut s = (0..nsets).min_by_key(|&s| (cost[s], s)).unwrap_or(0);
    let mut chosen = vec![0; n];
    for i in (0..n).rev() {
        chosen[i] = s;
        if i > 0 {
            s = back[i][s];
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_roster_matches_engine_md() {
        let r = Roster::trainium();
        assert_eq!(r.sets.len(), 21);
        assert_eq!(r.sets[10].name, "gelu_and_others");
        // ENGINE.md: gelu and its derivative share a set; silu and its derivative do not;
        // erf lives only in set 2.
        assert_eq!(r.sets_holding("erf"), vec![2]);
        assert!(r.holds(10, "gelu") && r.holds(10, "derivative_gelu"));
        assert!(r
            .sets_holding("silu")
            .iter()
            .all(|&s| !r.holds(s, "derivative_silu")));
        assert_eq!(r.function_codes["gelu"], 23);
    }

    #[test]
    fn gelu_then_derivative_loads_one_set() {
        let p = Roster::trainium()
            .plan(&["gelu", "derivative_gelu"], Chooser::FirstFit)
            .unwrap();
        assert_eq!(p.loads, vec![PlannedLoad { before: 0, set: 10 }]);
    }

    #[test]
    fn gelu_silu_gelu_loads_three_times() {
        let p = Roster::trainium()
            .plan(&["gelu", "silu", "gelu"], Chooser::FirstFit)
            .unwrap();
        let sets: Vec<usize> = p.loads.iter().map(|l| l.set).collect();
        assert_eq!(sets, vec![10, 18, 10]);
        let o = Roster::trainium()
            .plan(&["gelu", "silu", "gelu"], Chooser::Optimal)
            .unwrap();
        assert_eq!(o.loads.len(), 3, "no single set holds both gelu and silu");
    }

    #[test]
    fn optimal_beats_first_fit_where_first_fit_is_poor() {
        // First fit puts tanh in set 0 (exp_and_others) and gelu in set 10, alternating;
        // set 10 holds both, so one load suffices.
        let seq = ["tanh", "gelu", "tanh", "gelu", "tanh"];
        let r = Roster::trainium();
        assert_eq!(r.plan(&seq, Chooser::FirstFit).unwrap().loads.len(), 5);
        let o = r.plan(&seq, Chooser::Optimal).unwrap();
        assert_eq!(o.loads, vec![PlannedLoad { before: 0, set: 10 }]);
    }

    #[test]
    fn optimal_never_loads_more_than_first_fit() {
        let r = Roster::trainium();
        let fns = [
            "tanh",
            "gelu",
            "silu",
            "exp",
            "sigmoid",
            "erf",
            "sin",
            "ln",
            "derivative_silu",
            "abs",
            "arctan",
        ];
        // Deterministic pseudo-random sequences (LCG) of several lengths.
        let mut x: u64 = 12345;
        for len in 1..40 {
            let seq: Vec<&str> = (0..len)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    fns[(x >> 33) as usize % fns.len()]
                })
                .collect();
            let ff = r.plan(&seq, Chooser::FirstFit).unwrap();
            let op = r.plan(&seq, Chooser::Optimal).unwrap();
            assert!(op.loads.len() <= ff.loads.len(), "{seq:?}");
            for (i, f) in seq.iter().enumerate() {
                assert!(r.holds(op.chosen[i], f));
            }
        }
    }

    #[test]
    fn ninth_distinct_set_is_detected() {
        // First fit: exp→0, softplus→1, erf→2, sqrt→3, ln→5, derivative_sigmoid→7,
        // derivative_tanh→8, sin→9, gelu→10: nine distinct sets, the ninth at position 8.
        let seq = [
            "exp",
            "softplus",
            "erf",
            "sqrt",
            "ln",
            "derivative_sigmoid",
            "derivative_tanh",
            "sin",
            "gelu",
        ];
        let r = Roster::trainium();
        let p = r.plan(&seq, Chooser::FirstFit).unwrap();
        assert_eq!(p.distinct, vec![0, 1, 2, 3, 5, 7, 8, 9, 10]);
        assert_eq!(p.first_over_limit(r.max_sets_per_kernel), Some(8));
        assert_eq!(
            r.plan(&seq[..8], Chooser::FirstFit)
                .unwrap()
                .first_over_limit(8),
            None
        );
    }

    #[test]
    fn unknown_function_is_an_error() {
        let e = Roster::trainium()
            .plan(&["gelu", "frobnicate"], Chooser::FirstFit)
            .unwrap_err();
        assert_eq!(
            e,
            RosterError::NoSetHolds {
                function: "frobnicate".into(),
                position: 1
            }
        );
    }

    #[test]
    fn malformed_roster_is_an_error() {
        assert!(Roster::from_json("{}").is_err());
        assert!(Roster::from_json("not json").is_err());
    }
}
