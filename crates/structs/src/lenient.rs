//! Lenient decoding in the manner of Go's `encoding/json`, which is how Nomad reads request bodies.
//!
//! Go leaves a field at its zero value when the key is absent *or* its value is `null`, and it
//! ignores unknown keys. Serde's derive rejects `null` for a `String` or a `Vec`, so every wire
//! struct in this crate is declared through `wire_struct!`, which puts
//! `#[serde(default, deserialize_with = "null_as_default")]` on each field and derives the rest.
//!
//! Null fields: Nomad's API types hold pointers, and its canonicalization reads a `null` field
//! exactly as an absent one (a group's `"Count": null` is a count of 1, not 0; the Nomad CLI sends
//! such nulls for everything a jobspec leaves out). [`from_value_ignoring_key_case`] therefore
//! drops `null` struct fields before decoding, so they take the field's declared default; a
//! `null` map value or list element is left to the type's own decoder.
//!
//! Key case: Go also matches keys case-insensitively. The derived decoders here match the exact
//! wire spelling (`ID`, `JobID`, `MemoryMB`, …); [`from_value_ignoring_key_case`] adds Go's
//! case-insensitive matching for request bodies by rewriting keys against the field list serde
//! asks for, and is what the HTTP layer should use to decode bodies.
//!
//! Not here: any knowledge of particular Nomad types.

use serde::{Deserialize, Deserializer};

/// Decodes `null` as `T::default()`, like Go leaving a field at its zero value.
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Declares a wire struct: PascalCase keys, `Debug + Clone + PartialEq + Default + Serialize +
/// Deserialize`, every field defaulted when absent or `null`, unknown keys ignored.
///
/// A field may carry `= expr` to give the value used when the key is absent (Go's API fills these
/// from nil pointers during canonicalization, for example a group's `Count` of 1); `null` still
/// decodes to the type's zero value. Field attributes (renames, `skip_serializing_if`, docs) pass
/// through; a field must not carry its own `deserialize_with`.
macro_rules! wire_struct {
    (
        $(#[$struct_attr:meta])*
        pub struct $name:ident {
            $(
                $(#[$field_attr:meta])*
                pub $field:ident : $ty:ty $(= $default:expr)?
            ),* $(,)?
        }
    ) => {
        $(#[$struct_attr])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "PascalCase", default)]
        pub struct $name {
            $(
                $(#[$field_attr])*
                #[serde(deserialize_with = "crate::lenient::null_as_default")]
                pub $field: $ty,
            )*
        }

        impl Default for $name {
            fn default() -> Self {
                Self {
                    $( $field: wire_struct!(@default $($default)?), )*
                }
            }
        }
    };
    (@default) => { Default::default() };
    (@default $default:expr) => { $default };
}
pub(crate) use wire_struct;

/// Decodes `T` from a JSON value, matching object keys case-insensitively against the field names
/// each struct declares (Go's `encoding/json` rule). An exact match wins over a case-folded one;
/// keys that match no field are passed through unchanged (and then ignored).
pub fn from_value_ignoring_key_case<T>(value: serde_json::Value) -> Result<T, serde_json::Error>
where
    T: serde::de::DeserializeOwned,
{
    T::deserialize(case_fold::CaseFoldingValue(value))
}

mod case_fold {
    //! A `Deserializer` over `serde_json::Value` that renames object keys to the exact field
    //! names a struct asks for, at every depth.

    use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
    use serde::forward_to_deserialize_any;
    use serde_json::{Map, Value};

    pub(super) struct CaseFoldingValue(pub(super) Value);

    /// Renames `map`'s keys to the struct's field names and drops the keys whose value is `null`,
    /// so that a `null` field reads as an absent one (the field's declared default).
    fn rename_keys(map: Map<String, Value>, fields: &'static [&'static str]) -> Map<String, Value> {
        let mut renamed = Map::new();
        for (key, value) in map {
            if value.is_null() {
                continue;
            }
            if fields.contains(&key.as_str()) {
                // An exact key replaces any case-folded duplicate seen before it.
                renamed.insert(key, value);
                continue;
            }
            let canonical = match fields.iter().find(|field| field.eq_ignore_ascii_case(&key)) {
                Some(field) => (*field).to_string(),
                None => key,
            };
            // A case-folded key never replaces an exact one seen before it.
            renamed.entry(canonical).or_insert(value);
        }
        renamed
    }

    struct SeqOfValues(std::vec::IntoIter<Value>);

    impl<'de> SeqAccess<'de> for SeqOfValues {
        type Error = serde_json::Error;
        fn next_element_seed<S: DeserializeSeed<'de>>(
            &mut self,
            seed: S,
        ) -> Result<Option<S::Value>, Self::Error> {
            match self.0.next() {
                Some(value) => seed.deserialize(CaseFoldingValue(value)).map(Some),
                None => Ok(None),
            }
        }
    }

    struct MapOfValues {
        entries: serde_json::map::IntoIter,
        pending_value: Option<Value>,
    }

    impl<'de> MapAccess<'de> for MapOfValues {
        type Error = serde_json::Error;
        fn next_key_seed<K: DeserializeSeed<'de>>(
            &mut self,
            seed: K,
        ) -> Result<Option<K::Value>, Self::Error> {
            match self.entries.next() {
                Some((key, value)) => {
                    self.pending_value = Some(value);
                    let key_deserializer: de::value::StringDeserializer<serde_json::Error> =
                        key.into_deserializer();
                    seed.deserialize(key_deserializer).map(Some)
                }
                None => Ok(None),
            }
        }
        fn next_value_seed<V: DeserializeSeed<'de>>(
            &mut self,
            seed: V,
        ) -> Result<V::Value, Self::Error> {
            let value = self.pending_value.take().unwrap_or(Value::Null);
            seed.deserialize(CaseFoldingValue(value))
        }
    }

    fn visit_map_of<'de, V: Visitor<'de>>(
        map: Map<String, Value>,
        visitor: V,
    ) -> Result<V::Value, serde_json::Error> {
        visitor.visit_map(MapOfValues {
            entries: map.into_iter(),
            pending_value: None,
        })
    }

    impl<'de> de::Deserializer<'de> for CaseFoldingValue {
        type Error = serde_json::Error;

        fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
            match self.0 {
                Value::Array(items) => visitor.visit_seq(SeqOfValues(items.into_iter())),
                Value::Object(map) => visit_map_of(map, visitor),
                other => de::Deserializer::deserialize_any(other, visitor),
            }
        }

        fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
            match self.0 {
                Value::Null => visitor.visit_none(),
                other => visitor.visit_some(CaseFoldingValue(other)),
            }
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            name: &'static str,
            fields: &'static [&'static str],
            visitor: V,
        ) -> Result<V::Value, Self::Error> {
            match self.0 {
                Value::Object(map) => visit_map_of(rename_keys(map, fields), visitor),
                other => other.deserialize_struct(name, fields, visitor),
            }
        }

        fn deserialize_newtype_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            visitor: V,
        ) -> Result<V::Value, Self::Error> {
            visitor.visit_newtype_struct(self)
        }

        fn deserialize_enum<V: Visitor<'de>>(
            self,
            name: &'static str,
            variants: &'static [&'static str],
            visitor: V,
        ) -> Result<V::Value, Self::Error> {
            self.0.deserialize_enum(name, variants, visitor)
        }

        forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf unit unit_struct seq tuple tuple_struct map identifier ignored_any
        }
    }
}
