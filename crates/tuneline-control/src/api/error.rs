//! API errors as JSON bodies with the right status, and the JSON body
//! extractor that names the field a malformed request got wrong.

use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::db::DbError;
use tuneline_api::ApiError;

/// An error response.
#[derive(Debug)]
pub struct Failure {
    /// The HTTP status it answers with.
    pub status: StatusCode,
    /// The JSON body: code, message and what to do.
    pub body: ApiError,
}

impl Failure {
    /// 400: the request is wrong at `field`.
    pub fn bad(field: impl Into<String>, error: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            body: ApiError { error: error.into(), field: Some(field.into()) },
        }
    }

    /// 422: the request is well-formed, but what `field` names does not fit
    /// (a dataset that is not committed, a config that does not parse).
    pub fn unprocessable(field: impl Into<String>, error: impl Into<String>) -> Self {
        Self {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            body: ApiError { error: error.into(), field: Some(field.into()) },
        }
    }

    /// Any status with a message.
    pub fn new(status: StatusCode, error: impl Into<String>) -> Self {
        Self { status, body: ApiError { error: error.into(), field: None } }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body)).into_response()
    }
}

impl From<DbError> for Failure {
    fn from(e: DbError) -> Self {
        let status = match &e {
            DbError::NoJob(_) | DbError::NoWorker(_) => StatusCode::NOT_FOUND,
            DbError::NotHolder { .. } => StatusCode::FORBIDDEN,
            DbError::Transition { .. } => StatusCode::CONFLICT,
            DbError::Sqlite(_) | DbError::Corrupt(..) => StatusCode::INTERNAL_SERVER_ERROR,
            DbError::Refused(body) => {
                return Self { status: StatusCode::UNPROCESSABLE_ENTITY, body: body.clone() }
            }
        };
        Self::new(status, e.to_string())
    }
}

/// A JSON request body. Unlike axum's `Json`, a body that does not fit
/// gets 400 with the path of the field at fault (`spec.config`, `wait_s`).
/// JSON has one number type: an integer written `3.0` is taken as 3, as the
/// OpenAPI document's `integer` allows, and one past `int64` is refused.
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = Failure;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = axum::body::Bytes::from_request(req, state).await.map_err(|e| {
            Failure::new(e.status(), format!("unreadable request body: {}", e.body_text()))
        })?;
        decode(&bytes).map(Body)
    }
}

/// A request body's bytes as `T`, as [`Body`] takes them: a JSON object, integral
/// floats as integers, a field that does not fit named by its path (400).
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Failure> {
    let mut value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| Failure::bad("body", format!("body: {e}")))?;
    if !value.is_object() {
        // serde would take an array as a struct's fields in order.
        return Err(Failure::bad("body", "body: expected a JSON object"));
    }
    let mut oversized = Vec::new();
    integers(&mut value, &mut String::new(), &mut oversized);
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        match oversized.iter().find(|(at, _)| *at == path) {
            Some((field, n)) => Failure::bad(
                field.clone(),
                format!("{field}: {n} is past the largest integer the API takes (2^63 - 1)"),
            ),
            None => field_error(e, "body"),
        }
    })
}

/// 2^63: the first float past `int64`.
const INT64_END: f64 = 9_223_372_036_854_775_808.0;

/// Rewrites integral floats in `value` as integers, and integers past `int64`
/// as floats, which no integer field takes; those are listed in `oversized`
/// with their path, so that the field that refuses one can say why. A free-form
/// field (a metric's extra keys) takes them as it takes any number.
fn integers(
    value: &mut serde_json::Value,
    path: &mut String,
    oversized: &mut Vec<(String, String)>,
) {
    use serde_json::Value;
    match value {
        Value::Number(n) if n.as_u64().is_some_and(|u| u > i64::MAX as u64) => {
            oversized.push((path.clone(), n.to_string()));
            *value = n.as_f64().map(Value::from).unwrap_or(Value::Null);
        }
        Value::Number(n) => {
            // Every float from 2^53 up is integral, and exact: those below 2^63 fit int64 as they are.
            if let Some(f) =
                n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0 && f.abs() < INT64_END)
            {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                integers(item, path, oversized);
                path.truncate(len);
            }
        }
        Value::Object(fields) => {
            for (key, item) in fields.iter_mut() {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                integers(item, path, oversized);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// A request's query parameters. Unlike axum's `Query`, a bad one gets the
/// JSON error of every other 400, naming the parameter.
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de).map(Params).map_err(|e| field_error(e, "query"))
    }
}

/// A deserialization error as a 400 naming its field, or `whole` when it is
/// not about one field.
fn field_error<E: std::fmt::Display>(e: serde_path_to_error::Error<E>, whole: &str) -> Failure {
    let path = e.path().to_string();
    let field = if path == "." { whole.to_string() } else { path };
    Failure::bad(field.clone(), format!("{field}: {}", e.into_inner()))
}

/// The one integer path parameter (`{id}`, `{job}`). Unlike axum's `Path`,
/// a bad one gets the JSON error of every other 400, naming the parameter.
pub struct PathId(pub i64);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|e| Failure::new(StatusCode::BAD_REQUEST, e.body_text()))?;
        let (name, value) = params.iter().next().ok_or_else(|| {
            Failure::new(StatusCode::INTERNAL_SERVER_ERROR, "route has no path parameter")
        })?;
        value.parse().map(PathId).map_err(|_| Failure::bad(name, format!("{name}: `{value}` is not an id; ids are integers, as `tuneline jobs ls` shows them")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Counts {
        a: u64,
        b: i64,
    }

    #[test]
    fn an_integral_float_is_the_integer_it_writes_up_to_int64() {
        let c: Counts = decode(br#"{"a": 9007199254740992.0, "b": -1e17}"#).ok().unwrap();
        assert_eq!((c.a, c.b), (1 << 53, -100_000_000_000_000_000));
        assert!(decode::<Counts>(br#"{"a": 1.5, "b": 0}"#).is_err());
        assert!(decode::<Counts>(br#"{"a": 1e19, "b": 0}"#).is_err());
    }

    #[derive(serde::Deserialize)]
    struct Metric {
        step: u64,
    }

    #[test]
    fn an_integer_past_int64_is_refused_by_the_field_that_counts_but_not_by_a_free_form_one() {
        #[derive(serde::Deserialize)]
        struct Beat {
            metrics: Vec<Metric>,
        }
        let e = decode::<Beat>(br#"{"metrics": [{"step": 10015313342956576768}]}"#).err().unwrap();
        assert_eq!(e.body.field.as_deref(), Some("metrics[0].step"));
        assert!(
            e.body.error.contains("10015313342956576768 is past the largest integer"),
            "{}",
            e.body.error
        );
        let ok = decode::<Beat>(br#"{"metrics": [{"step": 3, "x": [10015313342956576768]}]}"#);
        assert_eq!(ok.ok().unwrap().metrics[0].step, 3);
    }
}
