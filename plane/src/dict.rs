//! Per-dimension dictionaries: value → code.

use std::sync::Arc;

use ahash::AHashMap;

use crate::mem::{arc_str_bytes, table_bytes, vec_bytes};
use crate::{Code, DimRef, DimValue};

/// Value ↔ code for one dimension. Codes are dense, in order of first
/// appearance, and never reused while the plane lives.
///
/// Integers and text live in separate maps so a borrowed value
/// ([`DimRef`]) is looked up without building an owned one.
#[derive(Clone, Debug, Default)]
pub struct Dictionary {
    values: Vec<DimValue>,
    ints: AHashMap<i64, Code>,
    texts: AHashMap<Arc<str>, Code>,
    null: Option<Code>,
}

impl Dictionary {
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// # Panics
    /// If `code` is not in the dictionary.
    pub fn value(&self, code: Code) -> &DimValue {
        &self.values[code as usize]
    }

    pub fn code(&self, value: &DimValue) -> Option<Code> {
        self.code_ref(value.as_ref())
    }

    /// The code of a borrowed value (no allocation).
    #[inline]
    pub fn code_ref(&self, value: DimRef<'_>) -> Option<Code> {
        match value {
            DimRef::Null if crate::mutation::active("null_folded") && !self.values.is_empty() => {
                Some(0)
            }
            DimRef::Null => self.null,
            DimRef::Int(i) => self.ints.get(&i).copied(),
            DimRef::Text(s) => self.texts.get(s).copied(),
        }
    }

    /// The code of NULL, if NULL has been seen (COUNT(DISTINCT) skips it).
    pub fn null_code(&self) -> Option<Code> {
        self.null
    }

    /// All values, indexed by code.
    pub fn values(&self) -> &[DimValue] {
        &self.values
    }

    /// Whether `code` stands for `value` (the encoder's last-value check).
    #[inline]
    pub(crate) fn is(&self, code: Code, value: DimRef<'_>) -> bool {
        self.values
            .get(code as usize)
            .is_some_and(|v| v.as_ref() == value)
    }

    /// Add a value the dictionary does not hold; returns its new code.
    pub(crate) fn push(&mut self, value: DimRef<'_>) -> Code {
        debug_assert!(self.code_ref(value).is_none());
        let code = self.values.len() as Code;
        let owned = match value {
            DimRef::Null => {
                self.null = Some(code);
                DimValue::Null
            }
            DimRef::Int(i) => {
                self.ints.insert(i, code);
                DimValue::Int(i)
            }
            DimRef::Text(s) => {
                let s: Arc<str> = Arc::from(s);
                self.texts.insert(Arc::clone(&s), code);
                DimValue::Text(s)
            }
        };
        self.values.push(owned);
        code
    }

    /// Heap bytes (the text of a value is shared by the list and its map).
    pub(crate) fn heap_bytes(&self) -> usize {
        let text: usize = self.texts.keys().map(|s| arc_str_bytes(s.len())).sum();
        vec_bytes::<DimValue>(self.values.capacity())
            + text
            + table_bytes::<(i64, Code)>(self.ints.capacity())
            + table_bytes::<(Arc<str>, Code)>(self.texts.capacity())
    }

    /// Check that the list and the maps agree; `Err` says how they don't.
    pub(crate) fn check(&self) -> Result<(), String> {
        let mut nulls = 0;
        for (c, v) in self.values.iter().enumerate() {
            if self.code(v) != Some(c as Code) {
                return Err(format!("value {v:?} does not map back to its code {c}"));
            }
            nulls += usize::from(*v == DimValue::Null);
        }
        if self.ints.len() + self.texts.len() + nulls != self.values.len() || nulls > 1 {
            return Err(format!(
                "maps hold {} ints, {} texts and {nulls} NULLs for {} values",
                self.ints.len(),
                self.texts.len(),
                self.values.len()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_and_text_of_the_same_digits_are_different_values() {
        let mut d = Dictionary::default();
        let a = d.push(DimRef::Int(1));
        let b = d.push(DimRef::Text("1"));
        let n = d.push(DimRef::Null);
        assert_eq!((a, b, n), (0, 1, 2));
        assert_eq!(d.code(&DimValue::Int(1)), Some(0));
        assert_eq!(d.code(&DimValue::from("1")), Some(1));
        assert_eq!(d.null_code(), Some(2));
        assert!(d.is(1, DimRef::Text("1")));
        assert!(!d.is(1, DimRef::Int(1)));
        d.check().unwrap();
    }
}
