//! Reading benchmark JSON by path: every error names the field it is about
//! (`results[3].mlps.median: expected a number, found null`).

use serde_json::Value;

/// What a document lacks or garbles, by the path of the field (`""`: the document itself).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// The object has no such field.
    #[error("{}: missing", shown(.path))]
    Missing { path: String },
    /// The value is of another kind than the reader needs.
    #[error("{}: expected {expected}, found {found}", shown(.path))]
    Kind {
        path: String,
        expected: &'static str,
        found: &'static str,
    },
}

/// A field's path as a [`ShapeError`] names it: the empty path is the document.
fn shown(path: &str) -> &str {
    if path.is_empty() {
        "the document"
    } else {
        path
    }
}

/// A value and the path that reached it.
pub struct Node<'a> {
    pub v: &'a Value,
    pub path: String,
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl<'a> Node<'a> {
    fn join(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The error that this value is not `expected`.
    fn not_a(&self, expected: &'static str) -> ShapeError {
        ShapeError::Kind {
            path: self.path.clone(),
            expected,
            found: kind(self.v),
        }
    }

    /// The field `key` of an object.
    pub fn get(&self, key: &str) -> Result<Node<'a>, ShapeError> {
        self.opt(key)?.ok_or_else(|| ShapeError::Missing {
            path: self.join(key),
        })
    }

    /// The field `key`, or `None` when the object lacks it (an error if this is no object).
    pub fn opt(&self, key: &str) -> Result<Option<Node<'a>>, ShapeError> {
        match self.v {
            Value::Object(m) => Ok(m.get(key).map(|v| Node {
                v,
                path: self.join(key),
            })),
            _ => Err(self.not_a("an object")),
        }
    }

    pub fn num(&self) -> Result<f64, ShapeError> {
        match self.v.as_f64() {
            Some(x) if x.is_finite() => Ok(x),
            _ => Err(self.not_a("a number")),
        }
    }

    pub fn str(&self) -> Result<&'a str, ShapeError> {
        self.v.as_str().ok_or_else(|| self.not_a("a string"))
    }

    /// A string, or a number shown as text (fields such as a threshold may be either).
    pub fn text(&self) -> Result<String, ShapeError> {
        match self.v {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            _ => Err(self.not_a("a string or number")),
        }
    }

    /// The elements of an array.
    pub fn items(&self) -> Result<Vec<Node<'a>>, ShapeError> {
        match self.v {
            Value::Array(a) => Ok(a
                .iter()
                .enumerate()
                .map(|(i, v)| Node {
                    v,
                    path: format!("{}[{i}]", self.path),
                })
                .collect()),
            _ => Err(self.not_a("an array")),
        }
    }
}

/// The field `key` of `n` as a number.
pub fn num(n: &Node<'_>, key: &str) -> Result<f64, ShapeError> {
    n.get(key)?.num()
}

/// The field `key` of `n` as a string.
pub fn str<'a>(n: &Node<'a>, key: &str) -> Result<&'a str, ShapeError> {
    n.get(key)?.str()
}

/// The elements of the array `key` of `n`.
pub fn items<'a>(n: &Node<'a>, key: &str) -> Result<Vec<Node<'a>>, ShapeError> {
    n.get(key)?.items()
}

/// The root of a document as a node.
pub fn root(v: &Value) -> Node<'_> {
    Node {
        v,
        path: String::new(),
    }
}

/// Every number under `v` (objects walked, arrays not), with its dotted key path.
pub fn numeric_leaves(v: &Value) -> Vec<(String, f64)> {
    fn walk(v: &Value, prefix: &str, out: &mut Vec<(String, f64)>) {
        if let Value::Object(m) = v {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match x {
                    Value::Number(n) => {
                        if let Some(f) = n.as_f64().filter(|f| f.is_finite()) {
                            out.push((key, f));
                        }
                    }
                    Value::Object(_) => walk(x, &key, out),
                    _ => {}
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(v, "", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_name_the_path() {
        let d = json!({"results": [{"mlps": {"median": null}}, 3]});
        let r = root(&d);
        let rows = items(&r, "results").unwrap_or_default();
        assert_eq!(rows.len(), 2);
        let m = rows[0].get("mlps").and_then(|m| num(&m, "median"));
        assert_eq!(
            m,
            Err(ShapeError::Kind {
                path: "results[0].mlps.median".into(),
                expected: "a number",
                found: "null"
            })
        );
        let text = |e: Option<ShapeError>| e.map(|e| e.to_string());
        assert_eq!(
            text(m.err()),
            Some("results[0].mlps.median: expected a number, found null".into())
        );
        assert_eq!(
            text(num(&rows[1], "x").err()).as_deref(),
            Some("results[1]: expected an object, found a number")
        );
        assert_eq!(
            items(&r, "nope").err(),
            Some(ShapeError::Missing {
                path: "nope".into()
            })
        );
        assert_eq!(
            text(root(&json!([1])).get("a").err()).as_deref(),
            Some("the document: expected an object, found an array")
        );
    }

    #[test]
    fn numeric_leaves_walk_objects() {
        let d = json!({"a": 1, "b": {"c": 2.5, "d": "x", "e": [1, 2]}, "f": null});
        assert_eq!(
            numeric_leaves(&d),
            vec![("a".to_string(), 1.0), ("b.c".to_string(), 2.5)]
        );
    }
}
