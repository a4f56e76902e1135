//! Chrome trace-event JSON for a [`Schedule`], to open in <https://ui.perfetto.dev> or
//! `chrome://tracing`.
//!
//! Schema (the "JSON Object Format" of the Trace Event Format):
//! ```text
//! { "displayTimeUnit": "ns",
//!   "otherData": { "module": ..., "machine": ..., "chooser": ..., "total_ns": ... },
//!   "traceEvents": [
//!     // one process for the NeuronCore
//!     { "ph": "M", "name": "process_name", "pid": 1, "args": { "name": "<module> on <machine>" } },
//!     // one track (tid) per engine: 1 ACT, 2 DVE, 3 PE, 4 POOL, 5 DMA, with its name
//!     { "ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": { "name": "ACT" } },
//!     { "ph": "M", "name": "thread_sort_index", "pid": 1, "tid": 1, "args": { "sort_index": 1 } },
//!     // one complete slice per instruction; ts and dur in microseconds (floats)
//!     { "ph": "X", "name": "<hlo name>", "cat": "instruction", "pid": 1, "tid": <engine>,
//!       "ts": <µs>, "dur": <µs>,
//!       "args": { "opcode": "custom-call", "hlo_name": "<hlo name>", "elements": <n>,
//!                 "dtype": "bf16", "cycles": <engine cycles>, "cost_ns": <nominal ns>,
//!                 // activations only:
//!                 "function": "gelu", "set": 10, "set_name": "gelu_and_others",
//!                 // DMA only:
//!                 "bytes": <n> } },
//!     // table loads on the ACT track
//!     { "ph": "X", "name": "ACT_TABLE_LOAD", "cat": "table_load", "pid": 1, "tid": 1,
//!       "ts": ..., "dur": ..., "args": { "set": 10, "set_name": "gelu_and_others",
//!       "for_instruction": "<activation>", "hidden_ns": <ns> } },
//!     // the result store on the DMA track
//!     { "ph": "X", "name": "result-store", "cat": "result_store", "pid": 1, "tid": 5, ... } ] }
//! ```
//! Slices on one track never overlap (the scheduler guarantees it).

use super::cost::Engine;
use super::schedule::{Schedule, SliceKind};
use serde_json::{json, Map, Value};

/// Process id of the single NeuronCore in the trace.
pub const PID: u32 = 1;

/// The track id of an engine (1-based, in [`Engine::ALL`] order).
pub fn tid(e: Engine) -> u32 {
    e.index() as u32 + 1
}

/// Builds the trace-event JSON document for a schedule.
pub fn chrome_trace(s: &Schedule) -> Value {
    let mut events = vec![json!({
        "ph": "M", "name": "process_name", "pid": PID,
        "args": { "name": format!("{} on {}", s.module, s.machine) }
    })];
    for e in Engine::ALL {
        events.push(json!({
            "ph": "M", "name": "thread_name", "pid": PID, "tid": tid(e),
            "args": { "name": e.name() }
        }));
        events.push(json!({
            "ph": "M", "name": "thread_sort_index", "pid": PID, "tid": tid(e),
            "args": { "sort_index": tid(e) }
        }));
    }
    for sl in &s.slices {
        let mut args = Map::new();
        let cat = match &sl.kind {
            SliceKind::Instruction { opcode, .. } => {
                args.insert("opcode".into(), json!(opcode));
                args.insert("hlo_name".into(), json!(sl.name));
                args.insert("elements".into(), json!(sl.elements));
                if let Some(t) = &sl.dtype {
                    args.insert("dtype".into(), json!(t));
                }
                if let Some(f) = &sl.function {
                    args.insert("function".into(), json!(f));
                }
                if let (Some(set), Some(n)) = (sl.set, &sl.set_name) {
                    args.insert("set".into(), json!(set));
                    args.insert("set_name".into(), json!(n));
                }
                "instruction"
            }
            SliceKind::TableLoad {
                set,
                set_name,
                for_instruction,
                hidden_ns,
            } => {
                args.insert("set".into(), json!(set));
                args.insert("set_name".into(), json!(set_name));
                args.insert("for_instruction".into(), json!(for_instruction));
                args.insert("hidden_ns".into(), json!(hidden_ns));
                "table_load"
            }
            SliceKind::ResultStore => {
                args.insert("elements".into(), json!(sl.elements));
                "result_store"
            }
        };
        if let Some(c) = sl.cycles {
            args.insert("cycles".into(), json!(c));
        }
        args.insert("cost_ns".into(), json!(sl.cost_ns));
        if sl.engine == Engine::Dma {
            args.insert("bytes".into(), json!(sl.bytes));
        }
        events.push(json!({
            "ph": "X", "name": sl.name, "cat": cat, "pid": PID, "tid": tid(sl.engine),
            "ts": sl.start_ns / 1000.0, "dur": sl.dur_ns() / 1000.0,
            "args": Value::Object(args),
        }));
    }
    json!({
        "displayTimeUnit": "ns",
        "otherData": {
            "module": s.module, "machine": s.machine, "chooser": s.chooser,
            "total_ns": s.total_ns,
        },
        "traceEvents": events,
    })
}
