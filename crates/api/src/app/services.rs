//! The service catalog's routes (Nomad's native service discovery): `/v1/services`,
//! `/v1/service/<name>` (blocking, `choose`, `tag`), `DELETE /v1/service/<name>/<id>`,
//! `/v1/allocation/<id>/services`, `/v1/job/<id>/services`, and the two internal routes a
//! remote client registers and deregisters through.
//!
//! Not here: validation of a registration and what removes one (the server and the store).

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use drover_structs::service_catalog::{choose_services, service_list};
use drover_structs::{GenericResponse, ServiceRegistration};

use super::respond::{Meta, blocking_read, decode_body, json_response, page_response};
use crate::backend::{ApiBackend, Table};
use crate::client_rpc::{ServiceDeleteRequest, ServiceUpsertRequest};
use crate::error::ApiError;
use crate::paginate::{ListOptions, TokenKind, TokenParts, page, to_datum};
use crate::params::QueryParams;

// Nomad's service registration endpoints floor their index at 1 (`setReplyQueryMeta`).

/// `GET /v1/services`: per namespace (`*`: all), each service name with the union of its tags.
pub(super) async fn list<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
) -> Result<Response, ApiError> {
    let namespace = params.namespace().to_string();
    let (index, list) = blocking_read(backend, params, &[Table::ServiceRegistrations], |backend| {
        let registrations = backend.service_registrations(&namespace)?;
        Ok(service_list(&registrations))
    })
    .await?;
    json_response(&list, params, Meta::Read(index.max(1)))
}

/// Whether `service` carries every tag in `wanted`.
fn has_tags(service: &ServiceRegistration, wanted: &[&str]) -> bool {
    wanted
        .iter()
        .all(|tag| service.tags.iter().any(|have| have == tag))
}

/// `GET /v1/service/<name>`: its registrations, by ID. `tag` (repeatable) keeps those that
/// carry every given tag, as Consul's catalog filters; `choose=<n>|<key>` then picks `n` of
/// them by rendezvous hashing on `key`, as Nomad does.
pub(super) async fn read<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    service_name: &str,
) -> Result<Response, ApiError> {
    let namespace = params.namespace().to_string();
    let tags: Vec<&str> = params.get_all("tag").collect();
    let choose = params.non_empty("choose");
    let options = ListOptions::from_params(params)?;
    let (index, (services, next_token)) =
        blocking_read(backend, params, &[Table::ServiceRegistrations], |backend| {
            let mut services = backend.service_registrations_by_name(&namespace, service_name)?;
            services.retain(|service| has_tags(service, &tags));
            services.sort_by(|a, b| (&a.namespace, &a.id).cmp(&(&b.namespace, &b.id)));
            let (services, next_token) = page(
                services,
                &options,
                TokenKind::NamespaceId,
                |service| TokenParts {
                    namespace: &service.namespace,
                    id: &service.id,
                    create_index: service.create_index,
                },
                to_datum,
                Ok,
            )?;
            let services = match choose {
                Some(parameter) => choose_services(services, parameter).map_err(|error| {
                    ApiError::bad_request(format!("failed to choose services: {error}"))
                })?,
                None => services,
            };
            Ok((services, next_token))
        })
        .await?;
    page_response(&services, params, index.max(1), &next_token)
}

/// `DELETE /v1/service/<name>/<id>`: removes one registration by its namespace and ID (the
/// name in the path is not consulted, as in Nomad). Answers an empty body and the index.
pub(super) async fn delete<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    service_id: &str,
) -> Result<Response, ApiError> {
    let index = backend
        .delete_service_registration(params.namespace(), service_id)
        .await?;
    let mut response = (StatusCode::OK, Body::empty()).into_response();
    response
        .headers_mut()
        .insert("X-Nomad-Index", HeaderValue::from(index));
    Ok(response)
}

/// `GET /v1/allocation/<id>/services`: 404 when the allocation is unknown (or in another
/// namespace than asked), else its registrations (`[]` for none).
pub(super) async fn of_allocation<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    alloc_id: &str,
) -> Result<Response, ApiError> {
    let namespace = params.namespace().to_string();
    let (index, services) =
        blocking_read(backend, params, &[Table::ServiceRegistrations], |backend| {
            let found = backend
                .allocation(alloc_id)?
                .is_some_and(|allocation| allocation.namespace == namespace);
            if !found {
                return Ok(None);
            }
            backend.service_registrations_by_alloc(alloc_id).map(Some)
        })
        .await?;
    let services = services.ok_or_else(|| ApiError::not_found("allocation not found"))?;
    json_response(&services, params, Meta::Read(index.max(1)))
}

/// `GET /v1/job/<id>/services`: 404 when the job is unknown, else its registrations.
pub(super) async fn of_job<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    job_id: &str,
) -> Result<Response, ApiError> {
    let namespace = params.namespace().to_string();
    let (index, services) =
        blocking_read(backend, params, &[Table::ServiceRegistrations], |backend| {
            if backend.job(&namespace, job_id)?.is_none() {
                return Ok(None);
            }
            backend
                .service_registrations_by_job(&namespace, job_id)
                .map(Some)
        })
        .await?;
    let services = services.ok_or_else(|| ApiError::not_found("job not found"))?;
    json_response(&services, params, Meta::Read(index.max(1)))
}

/// `ServiceRegistration.Upsert` from a remote client.
pub(super) async fn upsert<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: ServiceUpsertRequest = decode_body(&body)?;
    if request.services.is_empty() {
        return Err(ApiError::bad_request(
            "must register at least one service (Services is empty)",
        ));
    }
    let index = backend
        .upsert_service_registrations(request.services)
        .await?;
    json_response(&GenericResponse { index }, params, Meta::Write(index))
}

/// A remote client's deregistrations, by ID.
pub(super) async fn delete_by_ids<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: ServiceDeleteRequest = decode_body(&body)?;
    if request.ids.is_empty() {
        return Err(ApiError::bad_request(
            "must deregister at least one service (IDs is empty)",
        ));
    }
    if request.ids.iter().any(String::is_empty) {
        return Err(ApiError::bad_request("IDs contains an empty service ID"));
    }
    let index = backend.delete_service_registrations(request.ids).await?;
    json_response(&GenericResponse { index }, params, Meta::Write(index))
}
