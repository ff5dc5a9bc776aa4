//! JWT client assertions (`private_key_jwt`, RFC 7523 section 2.2): the signed token rein
//! authenticates with at a token endpoint instead of a client secret, and the form body of a
//! token request.
//!
//! An assertion is made fresh for each request and lives five minutes: `iss` and `sub` are the
//! client ID, `aud` the authorization server's issuer, with `iat`, `exp` and a new `jti`. The
//! header's `typ` is `client-authentication+jwt` (draft-ietf-oauth-rfc7523bis), as rmcp writes
//! it. The key is only read here, never logged.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};

/// The `client_assertion_type` of a JWT client assertion.
pub(crate) const JWT_BEARER_ASSERTION: &str =
    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// How long an assertion is valid, in seconds.
const LIFETIME_SECONDS: u64 = 300;

#[derive(Debug, Serialize)]
struct Claims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
    jti: String,
}

/// The algorithm of a `private_key_jwt` client assertion (`oauth.signing_algorithm`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum SigningAlgorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256 (an RSA key).
    #[default]
    RS256,
    /// RSASSA-PKCS1-v1_5 with SHA-384 (an RSA key).
    RS384,
    /// RSASSA-PKCS1-v1_5 with SHA-512 (an RSA key).
    RS512,
    /// ECDSA on P-256 with SHA-256 (an EC key).
    ES256,
    /// ECDSA on P-384 with SHA-384 (an EC key).
    ES384,
}

impl SigningAlgorithm {
    fn jsonwebtoken(self) -> Algorithm {
        match self {
            SigningAlgorithm::RS256 => Algorithm::RS256,
            SigningAlgorithm::RS384 => Algorithm::RS384,
            SigningAlgorithm::RS512 => Algorithm::RS512,
            SigningAlgorithm::ES256 => Algorithm::ES256,
            SigningAlgorithm::ES384 => Algorithm::ES384,
        }
    }

    /// The name in JOSE and in `token_endpoint_auth_signing_alg_values_supported`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SigningAlgorithm::RS256 => "RS256",
            SigningAlgorithm::RS384 => "RS384",
            SigningAlgorithm::RS512 => "RS512",
            SigningAlgorithm::ES256 => "ES256",
            SigningAlgorithm::ES384 => "ES384",
        }
    }

    fn is_rsa(self) -> bool {
        matches!(self, SigningAlgorithm::RS256 | SigningAlgorithm::RS384 | SigningAlgorithm::RS512)
    }
}

/// A client assertion for `client_id` at the authorization server `audience`, signed with the
/// PEM private key `key_pem` at `now` (seconds since the epoch). Errors say what is wrong
/// with the key, never what is in it.
pub(crate) fn sign(
    client_id: &str,
    audience: &str,
    key_pem: &[u8],
    algorithm: SigningAlgorithm,
    now: u64,
) -> Result<String, String> {
    let key = if algorithm.is_rsa() {
        EncodingKey::from_rsa_pem(key_pem)
    } else {
        EncodingKey::from_ec_pem(key_pem)
    }
    .map_err(|error| {
        let kind = if algorithm.is_rsa() { "an RSA" } else { "an EC" };
        format!("not {kind} private key in PEM for {}: {error}", algorithm.name())
    })?;
    let mut header = Header::new(algorithm.jsonwebtoken());
    header.typ = Some("client-authentication+jwt".to_owned());
    let claims = Claims {
        iss: client_id,
        sub: client_id,
        aud: audience,
        iat: now,
        exp: now + LIFETIME_SECONDS,
        jti: fresh_id(),
    };
    jsonwebtoken::encode(&header, &claims, &key)
        .map_err(|error| format!("signing the client assertion with {}: {error}", algorithm.name()))
}

/// A new 128-bit identifier, unique per assertion (it need not be secret: a replay guard).
fn fresh_id() -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or(0);
    // `RandomState` keys come from the operating system's randomness.
    let half = |salt: u64| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(salt);
        hasher.write_u64(count);
        hasher.write_u128(nanos);
        hasher.write_u32(std::process::id());
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(1), half(2))
}

/// `application/x-www-form-urlencoded` of `pairs` (the WHATWG form encoding: `*-._` and
/// alphanumerics kept, space as `+`, every other byte `%XX`).
pub(crate) fn form_encode(pairs: &[(&str, &str)]) -> String {
    fn push(out: &mut String, text: &str) {
        for byte in text.bytes() {
            match byte {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                    out.push(char::from(byte));
                }
                b' ' => out.push('+'),
                _ => out.push_str(&format!("%{byte:02X}")),
            }
        }
    }
    let mut out = String::new();
    for (index, (key, value)) in pairs.iter().enumerate() {
        if index > 0 {
            out.push('&');
        }
        push(&mut out, key);
        out.push('=');
        push(&mut out, value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Test keys made for these tests only (`openssl genpkey`), in `test_data/keys/`.
    const EC_KEY: &str = include_str!("../test_data/keys/es256-private.pem");
    const EC_PUBLIC: &str = include_str!("../test_data/keys/es256-public.pem");
    const RSA_KEY: &str = include_str!("../test_data/keys/rs256-private.pem");
    const RSA_PUBLIC: &str = include_str!("../test_data/keys/rs256-public.pem");

    #[derive(Debug, serde::Deserialize)]
    struct Decoded {
        iss: String,
        sub: String,
        aud: String,
        iat: u64,
        exp: u64,
        jti: String,
    }

    fn verify(token: &str, key: jsonwebtoken::DecodingKey, algorithm: Algorithm) -> Decoded {
        let mut validation = jsonwebtoken::Validation::new(algorithm);
        validation.set_audience(&["https://as.example"]);
        validation.set_required_spec_claims(&["exp", "aud", "iss", "sub"]);
        validation.validate_exp = false;
        let data = jsonwebtoken::decode::<Decoded>(token, &key, &validation).expect("valid");
        assert_eq!(data.header.alg, algorithm);
        assert_eq!(data.header.typ.as_deref(), Some("client-authentication+jwt"));
        data.claims
    }

    #[test]
    fn an_es256_assertion_names_the_client_and_the_authorization_server() {
        let token = sign(
            "rein-client",
            "https://as.example",
            EC_KEY.as_bytes(),
            SigningAlgorithm::ES256,
            1_000,
        )
        .expect("signed");
        let public = jsonwebtoken::DecodingKey::from_ec_pem(EC_PUBLIC.as_bytes()).expect("key");
        let claims = verify(&token, public, Algorithm::ES256);
        assert_eq!((claims.iss.as_str(), claims.sub.as_str()), ("rein-client", "rein-client"));
        assert_eq!(claims.aud, "https://as.example");
        assert_eq!((claims.iat, claims.exp), (1_000, 1_300));
        assert_eq!(claims.jti.len(), 32);
    }

    #[test]
    fn an_rs256_assertion_verifies_with_the_public_key() {
        let token =
            sign("c", "https://as.example", RSA_KEY.as_bytes(), SigningAlgorithm::RS256, 50)
                .expect("signed");
        let public = jsonwebtoken::DecodingKey::from_rsa_pem(RSA_PUBLIC.as_bytes()).expect("key");
        let claims = verify(&token, public, Algorithm::RS256);
        assert_eq!((claims.iss.as_str(), claims.exp), ("c", 350));
    }

    #[test]
    fn each_assertion_has_its_own_id() {
        let sign_one =
            || sign("c", "https://as.example", EC_KEY.as_bytes(), SigningAlgorithm::ES256, 1);
        let public = || jsonwebtoken::DecodingKey::from_ec_pem(EC_PUBLIC.as_bytes()).expect("key");
        let first = verify(&sign_one().expect("signed"), public(), Algorithm::ES256);
        let second = verify(&sign_one().expect("signed"), public(), Algorithm::ES256);
        assert_ne!(first.jti, second.jti);
    }

    #[test]
    fn a_key_of_the_wrong_kind_is_refused_without_showing_it() {
        let error = sign("c", "https://as", EC_KEY.as_bytes(), SigningAlgorithm::RS256, 1)
            .expect_err("an EC key cannot sign RS256");
        assert!(error.contains("not an RSA private key") && error.contains("RS256"), "{error}");
        assert!(!error.contains("BEGIN"), "{error}");
        let error =
            sign("c", "https://as", b"not a key", SigningAlgorithm::ES256, 1).expect_err("not PEM");
        assert!(error.contains("not an EC private key"), "{error}");
    }

    #[test]
    fn form_values_are_escaped() {
        assert_eq!(
            form_encode(&[("grant_type", "client_credentials"), ("scope", "a b"), ("x", "é&=/")]),
            "grant_type=client_credentials&scope=a+b&x=%C3%A9%26%3D%2F"
        );
    }
}
