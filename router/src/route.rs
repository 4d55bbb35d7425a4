//! The route each query took, and counters of served and declined calls.

use std::collections::BTreeMap;
use std::fmt;

/// Where an answer came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RouteKind {
    /// Computed from a plane's cells.
    Plane,
    /// Read from a memo of an earlier exact answer.
    Memo,
    /// The cells answered the aggregate core, SQLite the rest of the
    /// statement over it (`crate::residue`).
    Residue,
    /// Run by SQLite.
    Engine,
}

impl RouteKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RouteKind::Plane => "plane",
            RouteKind::Memo => "memo",
            RouteKind::Residue => "residue",
            RouteKind::Engine => "engine",
        }
    }
}

impl fmt::Display for RouteKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The route of the last statement and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    pub kind: RouteKind,
    /// Why this route: "served (class X)" for a plane answer, else the decline reason.
    pub reason: String,
    /// The planed table involved, if any.
    pub table: Option<String>,
    /// Estimated cells the plane visits / rows the engine reads.
    pub plane_cost: Option<f64>,
    pub engine_cost: Option<f64>,
}

/// The reason a limb join's answer gives (`rules::answer_from_limb`).
pub(crate) const LIMB_REASON: &str = "served (join limb)";

impl Route {
    /// The route's short name: `plane`, `memo`, `limb` (a join answered
    /// from a plane and its limb: kind `Plane`), `residue` or `engine`.
    pub fn label(&self) -> &'static str {
        if self.kind == RouteKind::Plane && self.reason == LIMB_REASON {
            "limb"
        } else {
            self.kind.as_str()
        }
    }

    pub(crate) fn engine(reason: impl Into<String>) -> Route {
        Route {
            kind: RouteKind::Engine,
            reason: reason.into(),
            table: None,
            plane_cost: None,
            engine_cost: None,
        }
    }
}

/// Per-connection routing mode (`PRAGMA pleroma_route`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RouteMode {
    /// The cost router decides.
    #[default]
    Auto,
    /// Every query runs on SQLite.
    Engine,
    /// Every SELECT must be served by a plane, or fails with the reason.
    Plane,
}

/// Served and declined calls since the connection opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub served: u64,
    pub memo: u64,
    /// Declined SELECTs by reason.
    pub declined: BTreeMap<String, u64>,
}

impl Counters {
    pub fn declined_total(&self) -> u64 {
        self.declined.values().sum()
    }
}
