//! Reading benchmark JSON by path: every error names the field it is about
//! (`results[3].mlps.median: expected a number, found null`).

use serde_json::Value;

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

    fn name(&self) -> &str {
        if self.path.is_empty() {
            "the document"
        } else {
            &self.path
        }
    }

    fn not_object(&self) -> String {
        format!(
            "{}: expected an object, found {}",
            self.name(),
            kind(self.v)
        )
    }

    /// The field `key` of an object.
    pub fn get(&self, key: &str) -> Result<Node<'a>, String> {
        self.opt(key)?
            .ok_or_else(|| format!("{}: missing", self.join(key)))
    }

    /// The field `key`, or `None` when the object lacks it (an error if this is no object).
    pub fn opt(&self, key: &str) -> Result<Option<Node<'a>>, String> {
        match self.v {
            Value::Object(m) => Ok(m.get(key).map(|v| Node {
                v,
                path: self.join(key),
            })),
            _ => Err(self.not_object()),
        }
    }

    pub fn num(&self) -> Result<f64, String> {
        match self.v.as_f64() {
            Some(x) if x.is_finite() => Ok(x),
            _ => Err(format!(
                "{}: expected a number, found {}",
                self.name(),
                kind(self.v)
            )),
        }
    }

    pub fn str(&self) -> Result<&'a str, String> {
        self.v
            .as_str()
            .ok_or_else(|| format!("{}: expected a string, found {}", self.name(), kind(self.v)))
    }

    /// A string, or a number shown as text (fields such as a threshold may be either).
    pub fn text(&self) -> Result<String, String> {
        match self.v {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            other => Err(format!(
                "{}: expected a string or number, found {}",
                self.name(),
                kind(other)
            )),
        }
    }

    /// The elements of an array.
    pub fn items(&self) -> Result<Vec<Node<'a>>, String> {
        match self.v {
            Value::Array(a) => Ok(a
                .iter()
                .enumerate()
                .map(|(i, v)| Node {
                    v,
                    path: format!("{}[{i}]", self.path),
                })
                .collect()),
            other => Err(format!(
                "{}: expected an array, found {}",
                self.name(),
                kind(other)
            )),
        }
    }
}

/// The field `key` of `n` as a number.
pub fn num(n: &Node<'_>, key: &str) -> Result<f64, String> {
    n.get(key)?.num()
}

/// The field `key` of `n` as a string.
pub fn str<'a>(n: &Node<'a>, key: &str) -> Result<&'a str, String> {
    n.get(key)?.str()
}

/// The elements of the array `key` of `n`.
pub fn items<'a>(n: &Node<'a>, key: &str) -> Result<Vec<Node<'a>>, String> {
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
        let m = rows[0].get("mlps").map(|m| num(&m, "median"));
        assert_eq!(
            m.ok(),
            Some(Err(
                "results[0].mlps.median: expected a number, found null".into()
            ))
        );
        assert_eq!(
            num(&rows[1], "x").err().as_deref(),
            Some("results[1]: expected an object, found a number")
        );
        assert_eq!(items(&r, "nope").err().as_deref(), Some("nope: missing"));
        assert_eq!(
            root(&json!([1])).get("a").err().as_deref(),
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
