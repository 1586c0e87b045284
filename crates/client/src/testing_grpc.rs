//! Test support: a real gRPC health server (tonic's server, `grpc.health.v1.Health/Check`)
//! on 127.0.0.1 with a status per service, for the `grpc` check's tests. Feature `testing`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::NamedService;

/// The server's side of the health messages: decodes the request's service, encodes the
/// response's status.
#[derive(Clone, Copy, Default)]
pub struct ServerCodec;

impl Codec for ServerCodec {
    type Encode = u64;
    type Decode = String;
    type Encoder = ServerCodec;
    type Decoder = ServerCodec;
    fn encoder(&mut self) -> Self::Encoder {
        ServerCodec
    }
    fn decoder(&mut self) -> Self::Decoder {
        ServerCodec
    }
}

impl Encoder for ServerCodec {
    type Item = u64;
    type Error = tonic::Status;
    fn encode(&mut self, status: u64, dst: &mut EncodeBuf<'_>) -> Result<(), Self::Error> {
        use bytes::BufMut;
        dst.put_slice(&[0x08, u8::try_from(status).unwrap_or(0)]);
        Ok(())
    }
}

impl Decoder for ServerCodec {
    type Item = String;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<String>, Self::Error> {
        use bytes::Buf;
        let bytes = src.copy_to_bytes(src.remaining());
        // `0x0a <len> <service>` or nothing (services here are short).
        Ok(Some(if bytes.is_empty() {
            String::new()
        } else {
            String::from_utf8_lossy(bytes.get(2..).unwrap_or_default()).into_owned()
        }))
    }
}

/// `grpc.health.v1.Health` with a status per service (`NOT_FOUND` for others); a test may
/// change `statuses` while it serves.
#[derive(Clone)]
pub struct HealthService {
    pub statuses: Arc<Mutex<HashMap<String, u64>>>,
}

impl NamedService for HealthService {
    const NAME: &'static str = "grpc.health.v1.Health";
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl tower::Service<tonic::codegen::http::Request<tonic::body::Body>> for HealthService {
    type Response = tonic::codegen::http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: tonic::codegen::http::Request<tonic::body::Body>) -> Self::Future {
        let statuses = self.statuses.clone();
        Box::pin(async move {
            let check = tower::service_fn(move |request: tonic::Request<String>| {
                let found = statuses
                    .lock()
                    .ok()
                    .and_then(|statuses| statuses.get(request.get_ref()).copied());
                async move {
                    found
                        .map(tonic::Response::new)
                        .ok_or_else(|| tonic::Status::not_found("unknown service"))
                }
            });
            Ok(tonic::server::Grpc::new(ServerCodec)
                .unary(check, request)
                .await)
        })
    }
}

/// A health service answering `statuses` (service → `ServingStatus`).
pub fn health(statuses: &[(&str, u64)]) -> HealthService {
    HealthService {
        statuses: Arc::new(Mutex::new(
            statuses
                .iter()
                .map(|(service, status)| (service.to_string(), *status))
                .collect(),
        )),
    }
}

/// Serves `service` in plain HTTP/2 on 127.0.0.1; answers its `host:port`.
pub async fn serve_plain(service: HealthService) -> String {
    serve_plain_on(service, "127.0.0.1:0").await
}

/// Serves `service` in plain HTTP/2 on `bind`; answers its `host:port`.
pub async fn serve_plain_on(service: HealthService, bind: &str) -> String {
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .expect("bind the health server");
    let address = listener.local_addr().expect("local address").to_string();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    address
}
