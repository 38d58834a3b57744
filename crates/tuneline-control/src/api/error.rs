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
    /// The status.
    pub status: StatusCode,
    /// The body.
    pub body: ApiError,
}

impl Failure {
    /// 400: the request is wrong at `field`.
    pub fn bad(field: impl Into<String>, error: impl Into<String>) -> Self {
        Self { status: StatusCode::BAD_REQUEST, body: ApiError { error: error.into(), field: Some(field.into()) } }
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
            DbError::NotHolder { .. } | DbError::Transition { .. } => StatusCode::CONFLICT,
            DbError::Sqlite(_) | DbError::Corrupt(..) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, e.to_string())
    }
}

/// A JSON request body. Unlike axum's `Json`, a body that does not fit
/// gets 400 with the path of the field at fault (`spec.config`, `wait_s`).
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = Failure;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes =
            axum::body::Bytes::from_request(req, state).await.map_err(|e| Failure::new(StatusCode::BAD_REQUEST, format!("unreadable request body: {e}")))?;
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        match serde_path_to_error::deserialize(&mut de) {
            Ok(value) => Ok(Body(value)),
            Err(e) => {
                let path = e.path().to_string();
                let field = if path == "." { "body".to_string() } else { path };
                Err(Failure::bad(field.clone(), format!("{field}: {}", e.into_inner())))
            }
        }
    }
}

/// The one integer path parameter (`{id}`, `{job}`). Unlike axum's `Path`,
/// a bad one gets the JSON error of every other 400, naming the parameter.
pub struct PathId(pub i64);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let params = RawPathParams::from_request_parts(parts, state).await.map_err(|e| Failure::new(StatusCode::BAD_REQUEST, e.body_text()))?;
        let (name, value) = params.iter().next().ok_or_else(|| Failure::new(StatusCode::INTERNAL_SERVER_ERROR, "route has no path parameter"))?;
        value.parse().map(PathId).map_err(|_| Failure::bad(name, format!("{name}: `{value}` is not an id; ids are integers, as `tuneline jobs ls` shows them")))
    }
}
