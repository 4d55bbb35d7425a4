//! `PleromaSumExact(col)`: the exact sum of an INTEGER column as TEXT, never
//! overflowing. Registered on every connection so that the engine path and
//! the plane path give the same answer.

use rusqlite::functions::{Aggregate, Context, FunctionFlags};
use rusqlite::types::ValueRef;

struct SumExact;

impl Aggregate<(i128, bool), Option<String>> for SumExact {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<(i128, bool)> {
        Ok((0, false))
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut (i128, bool)) -> rusqlite::Result<()> {
        match ctx.get_raw(0) {
            ValueRef::Null => Ok(()),
            ValueRef::Integer(i) => {
                acc.0 += i as i128;
                acc.1 = true;
                Ok(())
            }
            _ => Err(rusqlite::Error::UserFunctionError(
                "PleromaSumExact: a non-INTEGER value".into(),
            )),
        }
    }

    /// NULL when no non-NULL value was seen, like SUM.
    fn finalize(
        &self,
        _: &mut Context<'_>,
        acc: Option<(i128, bool)>,
    ) -> rusqlite::Result<Option<String>> {
        Ok(acc.and_then(|(s, any)| any.then(|| s.to_string())))
    }
}

pub(crate) fn register(db: &rusqlite::Connection) -> rusqlite::Result<()> {
    db.create_aggregate_function(
        "PleromaSumExact",
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        SumExact,
    )
}
