//! Verifying a JWT as Nomad's JWT auth method does (HashiCorp `cap/jwt` semantics): the
//! compact JWS is parsed, its signature checked against a [`KeySet`] (static PEM keys, a JWKS
//! document, or the JWKS an OIDC discovery document names), its `alg` against the method's
//! `SigningAlgs` (RS256 when none are named), its audience against `BoundAudiences`, and its
//! times against the leeways (defaults: 150 s for a missing `exp`/`nbf`, 60 s of clock skew).
//! The error texts are cap's, so a refused login reads as in Nomad.
//!
//! Signatures: RS256, RS384, RS512 (RSASSA-PKCS1-v1_5 through the `rsa` crate) and ES256
//! (`p256`). Any other `alg` named in a method is refused when the method is written.
//!
//! Not here: fetching keys (the caller hands in a [`KeySet`]), what the claims then grant.

use base64::Engine;
use serde_json::{Map, Value};

use super::SsoError;

/// The signing algorithms drover verifies.
pub const SUPPORTED_ALGORITHMS: &[&str] = &["RS256", "RS384", "RS512", "ES256"];

/// One public key, with the key ID a JWKS gives it.
#[derive(Debug, Clone)]
pub struct PublicKey {
    pub key_id: Option<String>,
    pub key: KeyMaterial,
}

#[derive(Debug, Clone)]
pub enum KeyMaterial {
    Rsa(rsa::PublicKey),
    P256(p256::ecdsa::VerifyingKey),
}

/// The keys a token's signature is checked against.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    pub keys: Vec<PublicKey>,
}

/// What a token is expected to be (Nomad's `jwt.Expected` from the method's config).
#[derive(Debug, Clone, Default)]
pub struct Expected {
    pub audiences: Vec<String>,
    pub signing_algorithms: Vec<String>,
    pub expiration_leeway_ns: i64,
    pub not_before_leeway_ns: i64,
    pub clock_skew_leeway_ns: i64,
}

fn b64url(text: &str) -> Result<Vec<u8>, SsoError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .map_err(|error| SsoError::Token(format!("error parsing token: {error}")))
}

/// Parses PEM public keys (SPKI of RSA or P-256, or PKCS#1 RSA) as Nomad's
/// `JWTValidationPubKeys`.
pub fn parse_pem_keys(pems: &[String]) -> Result<KeySet, SsoError> {
    use p256::pkcs8::DecodePublicKey as _;
    use rsa::pkcs1::DecodeRsaPublicKey as _;
    let mut keys = Vec::new();
    for pem in pems {
        let key = if let Ok(key) = rsa::PublicKey::from_public_key_pem(pem) {
            KeyMaterial::Rsa(key)
        } else if let Ok(key) = rsa::PublicKey::from_pkcs1_pem(pem) {
            KeyMaterial::Rsa(key)
        } else if let Ok(key) = p256::ecdsa::VerifyingKey::from_public_key_pem(pem) {
            KeyMaterial::P256(key)
        } else {
            return Err(SsoError::Config(
                "unable to parse public key for JWT auth: data does not contain any valid RSA or ECDSA public keys".to_owned(),
            ));
        };
        keys.push(PublicKey { key_id: None, key });
    }
    Ok(KeySet { keys })
}

/// Parses a JWKS document (`{"keys":[...]}`); keys of a type drover does not verify are
/// skipped, as a JWKS may carry keys for other uses.
pub fn parse_jwks(document: &Value) -> Result<KeySet, SsoError> {
    let invalid =
        |why: &str| SsoError::Keys(format!("unable to get validation keys from JWKS: {why}"));
    let entries = document
        .get("keys")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("the document has no keys"))?;
    let mut keys = Vec::new();
    for entry in entries {
        let field = |name: &str| entry.get(name).and_then(Value::as_str);
        let key_id = field("kid").map(str::to_owned);
        let key = match (field("kty"), field("crv")) {
            (Some("RSA"), _) => {
                let (Some(n), Some(e)) = (field("n"), field("e")) else {
                    return Err(invalid("an RSA key lacks n or e"));
                };
                let n = rsa::BoxedUint::from_be_slice_vartime(&b64url(n)?);
                let e = rsa::BoxedUint::from_be_slice_vartime(&b64url(e)?);
                let key = rsa::PublicKey::new(n, e)
                    .map_err(|error| invalid(&format!("an RSA key is invalid: {error}")))?;
                KeyMaterial::Rsa(key)
            }
            (Some("EC"), Some("P-256")) => {
                let (Some(x), Some(y)) = (field("x"), field("y")) else {
                    return Err(invalid("an EC key lacks x or y"));
                };
                let mut point = vec![4u8];
                point.extend(b64url(x)?);
                point.extend(b64url(y)?);
                let key = p256::ecdsa::VerifyingKey::from_sec1_bytes(&point)
                    .map_err(|_| invalid("an EC key is not a point on P-256"))?;
                KeyMaterial::P256(key)
            }
            _ => continue,
        };
        keys.push(PublicKey { key_id, key });
    }
    Ok(KeySet { keys })
}

fn verify_with(key: &KeyMaterial, algorithm: &str, input: &[u8], signature: &[u8]) -> bool {
    use sha2::Digest as _;
    match (key, algorithm) {
        (KeyMaterial::Rsa(key), "RS256") => key
            .verify(
                rsa::Pkcs1v15Sign::new::<sha2::Sha256>(),
                &sha2::Sha256::digest(input),
                signature,
            )
            .is_ok(),
        (KeyMaterial::Rsa(key), "RS384") => key
            .verify(
                rsa::Pkcs1v15Sign::new::<sha2::Sha384>(),
                &sha2::Sha384::digest(input),
                signature,
            )
            .is_ok(),
        (KeyMaterial::Rsa(key), "RS512") => key
            .verify(
                rsa::Pkcs1v15Sign::new::<sha2::Sha512>(),
                &sha2::Sha512::digest(input),
                signature,
            )
            .is_ok(),
        (KeyMaterial::P256(key), "ES256") => {
            use p256::ecdsa::signature::Verifier as _;
            p256::ecdsa::Signature::from_slice(signature)
                .is_ok_and(|signature| key.verify(input, &signature).is_ok())
        }
        _ => false,
    }
}

fn seconds(claims: &Map<String, Value>, name: &str) -> i64 {
    // A fractional NumericDate counts whole seconds, as go-jose reads it.
    claims
        .get(name)
        .and_then(Value::as_f64)
        .map_or(0, |value| value as i64)
}

fn leeway_seconds(leeway_ns: i64, default_seconds: i64) -> i64 {
    match leeway_ns {
        ns if ns < 0 => 0,
        0 => default_seconds,
        ns => ns / 1_000_000_000,
    }
}

/// Verifies `token` against `keys` and `expected` at `now_ns` (Unix nanoseconds); answers
/// the token's claims.
pub fn validate(
    token: &str,
    keys: &KeySet,
    expected: &Expected,
    now_ns: i64,
) -> Result<Map<String, Value>, SsoError> {
    let token_error = |message: String| SsoError::Token(message);
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(token_error(
            "error parsing token: compact JWS format must have three parts".to_owned(),
        ));
    };
    let header: Value = serde_json::from_slice(&b64url(header)?)
        .map_err(|error| token_error(format!("error parsing token: {error}")))?;
    let signature = b64url(signature)?;
    if signature.is_empty() {
        return Err(token_error("token must be signed".to_owned()));
    }
    let algorithm = header.get("alg").and_then(Value::as_str).unwrap_or("");
    let key_id = header.get("kid").and_then(Value::as_str);
    let signing_input = &token[..header_and_payload_len(token)];
    let verified = keys
        .keys
        .iter()
        .filter(|key| match (key_id, key.key_id.as_deref()) {
            (Some(wanted), Some(have)) => wanted == have,
            _ => true,
        })
        .any(|key| verify_with(&key.key, algorithm, signing_input.as_bytes(), &signature));
    if !verified {
        return Err(token_error(
            "error verifying token signature: no known key successfully validated the token signature".to_owned(),
        ));
    }
    let expected_algorithms: Vec<&str> = if expected.signing_algorithms.is_empty() {
        vec!["RS256"]
    } else {
        expected
            .signing_algorithms
            .iter()
            .map(String::as_str)
            .collect()
    };
    if !expected_algorithms.contains(&algorithm) {
        return Err(token_error(
            "invalid algorithm (alg) header parameter: token signed with unexpected algorithm"
                .to_owned(),
        ));
    }
    let claims: Map<String, Value> = serde_json::from_slice(&b64url(payload)?)
        .map_err(|error| token_error(format!("error parsing token: {error}")))?;
    if !expected.audiences.is_empty() {
        let audiences: Vec<&str> = match claims.get("aud") {
            Some(Value::String(one)) => vec![one.as_str()],
            Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !expected
            .audiences
            .iter()
            .any(|wanted| audiences.contains(&wanted.as_str()))
        {
            return Err(token_error(
                "invalid audience (aud) claim: audience claim does not match any expected audience"
                    .to_owned(),
            ));
        }
    }
    let issued_at = seconds(&claims, "iat");
    let mut expiry = seconds(&claims, "exp");
    let mut not_before = seconds(&claims, "nbf");
    if issued_at == 0 && expiry == 0 && not_before == 0 {
        return Err(token_error(
            "no issued at (iat), not before (nbf), or expiration time (exp) claims in token"
                .to_owned(),
        ));
    }
    if expiry == 0 {
        let latest_start = issued_at.max(not_before);
        expiry = latest_start + leeway_seconds(expected.expiration_leeway_ns, 150);
    }
    if not_before == 0 {
        not_before = if issued_at != 0 {
            issued_at
        } else {
            expiry - leeway_seconds(expected.not_before_leeway_ns, 150)
        };
    }
    let skew_ns = match expected.clock_skew_leeway_ns {
        ns if ns < 0 => 0,
        0 => 60_000_000_000,
        ns => ns,
    };
    let at = |seconds: i64| seconds.saturating_mul(1_000_000_000);
    if now_ns.saturating_add(skew_ns) < at(not_before) {
        return Err(token_error(
            "invalid not before (nbf) claim: token not yet valid".to_owned(),
        ));
    }
    if now_ns.saturating_sub(skew_ns) > at(expiry) {
        return Err(token_error(
            "invalid expiration time (exp) claim: token is expired".to_owned(),
        ));
    }
    if issued_at != 0 && now_ns.saturating_add(skew_ns) < at(issued_at) {
        return Err(token_error(
            "invalid issued at (iat) claim: token issued in the future".to_owned(),
        ));
    }
    Ok(claims)
}

/// The length of `header.payload` in a compact JWS (everything before the last dot).
fn header_and_payload_len(token: &str) -> usize {
    token.rfind('.').unwrap_or(0)
}
