//! Results into Python objects and Python values into scenario input, through serde's data
//! model: a report becomes dicts, lists, ints, floats, strings and None (never JSON text), and a
//! dict scenario reaches the one Rust schema without passing through another format.

use crate::errors::ScenarioError;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde::Serialize;
use serde_json::Value;

/// `value` as Python objects.
pub(crate) fn to_py<T: Serialize>(py: Python<'_>, value: &T) -> PyResult<Py<PyAny>> {
    let v = serde_json::to_value(value).map_err(|e| PyTypeError::new_err(e.to_string()))?;
    value_to_py(py, &v)
}

fn value_to_py(py: Python<'_>, v: &Value) -> PyResult<Py<PyAny>> {
    Ok(match v {
        Value::Null => py.None(),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any().unbind(),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.into_pyobject(py)?.into_any().unbind(),
            (None, Some(i)) => i.into_pyobject(py)?.into_any().unbind(),
            _ => n
                .as_f64()
                .unwrap_or(f64::NAN)
                .into_pyobject(py)?
                .into_any()
                .unbind(),
        },
        Value::String(s) => PyString::new(py, s).into_any().unbind(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(value_to_py(py, item)?)?;
            }
            list.into_any().unbind()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, item) in map {
                dict.set_item(k, value_to_py(py, item)?)?;
            }
            dict.into_any().unbind()
        }
    })
}

/// A Python value (dicts with string keys, lists or tuples, ints, floats, strings, bools, None)
/// as serde's data model; `path` names the value in errors, each a `ScenarioError` (a value a
/// scenario cannot hold is bad input, like any other).
pub(crate) fn from_py(obj: &Bound<'_, PyAny>, path: &str) -> PyResult<Value> {
    if obj.is_none() {
        Ok(Value::Null)
    } else if let Ok(b) = obj.cast::<PyBool>() {
        Ok(Value::Bool(b.is_true()))
    } else if obj.is_instance_of::<PyInt>() {
        match obj.extract::<u64>() {
            Ok(u) => Ok(Value::from(u)),
            Err(_) => obj.extract::<i64>().map(Value::from).map_err(|_| {
                ScenarioError::new_err(format!("{path}: integer outside -2^63..2^64-1"))
            }),
        }
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        Ok(serde_json::Number::from_f64(f.value()).map_or(Value::Null, Value::Number))
    } else if let Ok(s) = obj.cast::<PyString>() {
        Ok(Value::String(
            s.to_str()
                .map_err(|_| {
                    ScenarioError::new_err(format!("{path}: a string that is not valid Unicode"))
                })?
                .to_owned(),
        ))
    } else if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = serde_json::Map::new();
        for (k, v) in d.iter() {
            let key: String = k
                .extract()
                .map_err(|_| ScenarioError::new_err(format!("{path}: keys must be strings")))?;
            let item = from_py(&v, &format!("{path}.{key}"))?;
            map.insert(key, item);
        }
        Ok(Value::Object(map))
    } else if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for (i, item) in obj.try_iter()?.enumerate() {
            out.push(from_py(&item?, &format!("{path}[{i}]"))?);
        }
        Ok(Value::Array(out))
    } else {
        let type_name = obj.get_type().name()?;
        Err(ScenarioError::new_err(format!(
            "{path}: a {type_name} cannot be part of a scenario (use dict, list, int, float, str, \
             bool or None)"
        )))
    }
}
