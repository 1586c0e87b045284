//! The `grpc` check: one call of the standard health service, `grpc.health.v1.Health/Check`,
//! with the check's `grpc_service`, over plain HTTP/2 or, with `grpc_use_tls`, over TLS through
//! the system OpenSSL (the binding reqwest already uses; `tls_skip_verify` and
//! `tls_server_name` as for https checks, ALPN `h2`). `SERVING` passes; any other status, a
//! gRPC error or no answer within the timeout fails, with Consul's output texts.
//!
//! The transport is tonic's channel (already in the tree through etcd-client). The two
//! messages are tiny — a request with one string field, a response with one enum field — so
//! they are encoded and decoded here by hand ([`HealthCodec`]) rather than through prost and
//! generated code.
//!
//! Not here: timers, counters, or where the address comes from (see `hook`).

use std::time::Duration;

use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};

use super::probe::ProbeResult;
use super::status::Outcome;

/// The health service's method.
const CHECK_PATH: &str = "/grpc.health.v1.Health/Check";

/// `HealthCheckResponse.ServingStatus` values.
const SERVING: u64 = 1;

/// TLS for a `grpc_use_tls` check.
#[derive(Debug, Clone, Default)]
pub struct GrpcTls {
    /// Accept any certificate (`tls_skip_verify`).
    pub skip_verify: bool,
    /// The name sent and verified (`tls_server_name`); the address's host when empty.
    pub server_name: String,
}

/// Runs one health call against `address` (`host:port`) for `service` (`""`: the server as a
/// whole), bounded by `timeout`.
pub async fn grpc(
    address: &str,
    service: &str,
    tls: Option<GrpcTls>,
    timeout: Duration,
) -> ProbeResult {
    let target = if service.is_empty() {
        address.to_string()
    } else {
        format!("{address}/{service}")
    };
    let failure = |output: String| ProbeResult {
        outcome: Outcome::Failure,
        status_code: 0,
        output,
    };
    let call = async {
        let channel = connect(address, tls, timeout).await?;
        let mut client = tonic::client::Grpc::new(channel);
        client
            .ready()
            .await
            .map_err(|error| format!("gRPC check {target}: {error}"))?;
        client
            .unary(
                tonic::Request::new(service.to_string()),
                PathAndQuery::from_static(CHECK_PATH),
                HealthCodec,
            )
            .await
            .map(tonic::Response::into_inner)
            .map_err(|status| {
                format!(
                    "gRPC check {target}: rpc error: code = {:?} desc = {}",
                    status.code(),
                    status.message()
                )
            })
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(SERVING)) => ProbeResult {
            outcome: Outcome::Success,
            status_code: 0,
            output: format!("gRPC check {target}: success"),
        },
        Ok(Ok(status)) => failure(format!(
            "gRPC {target} serving status: {}",
            status_name(status)
        )),
        Ok(Err(message)) => failure(message),
        Err(_) => failure(format!("gRPC check {target}: context deadline exceeded")),
    }
}

/// The name of a `ServingStatus`, as the health proto spells it.
fn status_name(status: u64) -> String {
    match status {
        0 => "UNKNOWN".to_string(),
        1 => "SERVING".to_string(),
        2 => "NOT_SERVING".to_string(),
        3 => "SERVICE_UNKNOWN".to_string(),
        other => other.to_string(),
    }
}

async fn connect(
    address: &str,
    tls: Option<GrpcTls>,
    timeout: Duration,
) -> Result<Channel, String> {
    let endpoint = Endpoint::from_shared(format!("http://{address}"))
        .map_err(|error| format!("gRPC check {address}: invalid address: {error}"))?
        .connect_timeout(timeout)
        .timeout(timeout);
    let connected = match tls {
        None => endpoint.connect().await,
        Some(tls) => {
            let host = address
                .rsplit_once(':')
                .map_or(address, |(host, _)| host)
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let server_name = if tls.server_name.is_empty() {
                host
            } else {
                tls.server_name
            };
            let connector = native_tls::TlsConnector::builder()
                .danger_accept_invalid_certs(tls.skip_verify)
                .danger_accept_invalid_hostnames(tls.skip_verify)
                .request_alpns(&["h2"])
                .build()
                .map_err(|error| format!("gRPC check {address}: {error}"))?;
            let connector = tokio_native_tls::TlsConnector::from(connector);
            let address = address.to_string();
            endpoint
                .connect_with_connector(tower::service_fn(move |_: tonic::codegen::http::Uri| {
                    let (connector, address, server_name) =
                        (connector.clone(), address.clone(), server_name.clone());
                    async move {
                        let stream = tokio::net::TcpStream::connect(&address).await?;
                        let stream = connector
                            .connect(&server_name, stream)
                            .await
                            .map_err(std::io::Error::other)?;
                        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                    }
                }))
                .await
        }
    };
    connected.map_err(|error| {
        let mut message = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            message = format!("{message}: {cause}");
            source = cause.source();
        }
        format!("gRPC check {address}: {message}")
    })
}

/// Encodes a `HealthCheckRequest` (its `service`) and decodes a `HealthCheckResponse` (its
/// `status`), protobuf by hand.
#[derive(Debug, Clone, Copy, Default)]
pub struct HealthCodec;

impl Codec for HealthCodec {
    type Encode = String;
    type Decode = u64;
    type Encoder = HealthCodec;
    type Decoder = HealthCodec;

    fn encoder(&mut self) -> Self::Encoder {
        HealthCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        HealthCodec
    }
}

impl Encoder for HealthCodec {
    type Item = String;
    type Error = tonic::Status;

    fn encode(&mut self, service: String, dst: &mut EncodeBuf<'_>) -> Result<(), Self::Error> {
        use bytes::BufMut;
        dst.put_slice(&encode_request(&service));
        Ok(())
    }
}

impl Decoder for HealthCodec {
    type Item = u64;
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<u64>, Self::Error> {
        use bytes::Buf;
        let bytes = src.copy_to_bytes(src.remaining());
        decode_response(&bytes)
            .map(Some)
            .map_err(|message| tonic::Status::internal(format!("health response: {message}")))
    }
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        // The low seven bits, with the continuation bit.
        out.push((value & 0x7f) as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn read_varint(bytes: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at).ok_or("truncated varint")?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("varint too long".to_string())
}

/// `HealthCheckRequest { string service = 1; }` (an empty service is sent as no field).
pub fn encode_request(service: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(service.len() + 3);
    if !service.is_empty() {
        out.push(0x0a);
        put_varint(&mut out, service.len() as u64);
        out.extend_from_slice(service.as_bytes());
    }
    out
}

/// `HealthCheckResponse { ServingStatus status = 1; }`: the status (0, UNKNOWN, when absent);
/// fields it does not know are skipped, as protobuf readers do.
pub fn decode_response(bytes: &[u8]) -> Result<u64, String> {
    let mut at = 0;
    let mut status = 0;
    while at < bytes.len() {
        let key = read_varint(bytes, &mut at)?;
        match (key >> 3, key & 7) {
            (1, 0) => status = read_varint(bytes, &mut at)?,
            (_, 0) => {
                read_varint(bytes, &mut at)?;
            }
            (_, 1) => at += 8,
            (_, 2) => {
                let length = usize::try_from(read_varint(bytes, &mut at)?)
                    .map_err(|_| "length too large")?;
                at = at.checked_add(length).ok_or("length too large")?;
            }
            (_, 5) => at += 4,
            (_, wire) => return Err(format!("unsupported wire type {wire}")),
        }
        if at > bytes.len() {
            return Err("truncated field".to_string());
        }
    }
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_messages_are_protobuf() {
        assert_eq!(encode_request(""), Vec::<u8>::new());
        assert_eq!(encode_request("db"), vec![0x0a, 2, b'd', b'b']);
        let long = "s".repeat(200);
        assert_eq!(&encode_request(&long)[..3], &[0x0a, 0xc8, 0x01]);
        assert_eq!(decode_response(&[]), Ok(0));
        assert_eq!(decode_response(&[0x08, 1]), Ok(1));
        assert_eq!(decode_response(&[0x08, 2]), Ok(2));
        // An unknown length-delimited field before the status is skipped.
        assert_eq!(decode_response(&[0x12, 2, 0, 0, 0x08, 1]), Ok(1));
        assert!(decode_response(&[0x08]).is_err());
        assert!(decode_response(&[0x12, 5, 0]).is_err());
    }
}
