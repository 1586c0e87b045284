//! `drover login [-method NAME] [-login-token JWT] [-oidc-callback-addr ADDR] [-json] [-t T]`:
//! logs in through an auth method, as `nomad login` does. A JWT method exchanges the given
//! token at `/v1/acl/login`; an OIDC method asks `/v1/acl/oidc/auth-url` for the provider's
//! URL, opens it in the browser (or prints it when no browser opens), waits on a local
//! callback listener (`http://<addr>/oidc/callback`) for the provider's redirect, and
//! completes the flow at `/v1/acl/oidc/complete-auth`. Without `-method` the default method
//! is used.
//!
//! Not here: verifying anything (the servers do).

use clap::Args;
use drover_structs::acl::AclToken;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::commands::acl::{call, decode, format_token, say_formatted};
use crate::{ApiFlags, Io};

#[derive(Debug, Args)]
pub struct LoginArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// The auth method to log in with (default: the default method).
    #[arg(long = "method")]
    pub method: Option<String>,
    /// Deprecated in Nomad and ignored there, with a warning.
    #[arg(long = "type")]
    pub method_type: Option<String>,
    /// The token a JWT method verifies.
    #[arg(long = "login-token")]
    pub login_token: Option<String>,
    /// Where the local OIDC callback listener binds.
    #[arg(long = "oidc-callback-addr", default_value = "localhost:4649")]
    pub callback_addr: String,
    /// Print the token as JSON.
    #[arg(long = "json")]
    pub json: bool,
    /// Format the token with a Go template.
    #[arg(short = 't')]
    pub template: Option<String>,
}

const BROWSER_FAILED: &str = "Automatic opening of the OIDC provider for login has failed. To complete the\nauthentication, please visit your provider using the URL below:";

pub async fn run(arguments: LoginArgs, io: &mut Io<'_>) -> i32 {
    match login(&arguments, io).await {
        Ok(()) => 0,
        Err(message) => {
            io.error(message);
            1
        }
    }
}

async fn login(arguments: &LoginArgs, io: &mut Io<'_>) -> Result<(), String> {
    if arguments.method_type.is_some() {
        io.error("warning: '-type' flag has been deprecated for nomad login command and will be ignored.");
    }
    let methods = call(
        &arguments.api,
        "listing ACL auth methods",
        "GET",
        "/v1/acl/auth-methods",
        None,
    )
    .await?
    .unwrap_or(Value::Null);
    let methods = methods.as_array().cloned().unwrap_or_default();
    let field = |method: &Value, name: &str| {
        method
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let (name, method_type) = match arguments.method.as_deref().filter(|name| !name.is_empty()) {
        None => methods
            .iter()
            .find(|method| method.get("Default") == Some(&Value::Bool(true)))
            .map(|method| (field(method, "Name"), field(method, "Type")))
            .ok_or("Must specify an auth method name, no default found")?,
        Some(name) => {
            let method_type = methods
                .iter()
                .find(|method| field(method, "Name") == name)
                .map(|method| field(method, "Type"))
                .ok_or_else(|| format!("Error: method {name} not found in the state store. "))?;
            (name.to_owned(), method_type)
        }
    };
    let login_token = arguments.login_token.clone().unwrap_or_default();
    if method_type != "OIDC" && login_token.is_empty() {
        return Err("You need to provide a login token.".to_owned());
    }
    let token = match method_type.as_str() {
        "JWT" => {
            call(
                &arguments.api,
                "performing login",
                "PUT",
                "/v1/acl/login",
                Some(json!({"AuthMethodName": name, "LoginToken": login_token})),
            )
            .await?
        }
        "OIDC" => login_oidc(arguments, &name, io).await?,
        other => return Err(format!("Unsupported authentication type {other:?}")),
    };
    if say_formatted(io, arguments.json, arguments.template.as_deref(), &token)? {
        return Ok(());
    }
    let token: AclToken = decode(token)?;
    io.say(format!(
        "Successfully logged in via {method_type} and {name}\n"
    ));
    io.say(format_token(&token));
    Ok(())
}

/// A client nonce: 20 random bytes as hex (cap's `NewID` length).
fn client_nonce() -> Result<String, String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 20];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .map_err(|error| format!("Error performing login: cannot make a nonce: {error}"))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Decodes a query component (`+` is a space).
fn query_unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'+' => out.push(b' '),
            b'%' if index + 2 < bytes.len() && text.is_char_boundary(index + 3) => {
                match u8::from_str_radix(&text[index + 1..index + 3], 16) {
                    Ok(byte) => {
                        out.push(byte);
                        index += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            other => out.push(other),
        }
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn login_oidc(
    arguments: &LoginArgs,
    method: &str,
    io: &mut Io<'_>,
) -> Result<Option<Value>, String> {
    let listener = tokio::net::TcpListener::bind(&arguments.callback_addr)
        .await
        .map_err(|error| {
            format!(
                "Error performing login: listen tcp {}: {error}",
                arguments.callback_addr
            )
        })?;
    let redirect_uri = format!("http://{}/oidc/callback", arguments.callback_addr);
    let nonce = client_nonce()?;
    let answer = call(
        &arguments.api,
        "performing login",
        "PUT",
        "/v1/acl/oidc/auth-url",
        Some(json!({"AuthMethodName": method, "RedirectURI": redirect_uri, "ClientNonce": nonce})),
    )
    .await?
    .unwrap_or(Value::Null);
    let auth_url = answer
        .get("AuthURL")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if let Err(error) = open_browser(&auth_url) {
        io.error(format!("Error opening OIDC provider URL: {error}\n"));
        io.say(format!("{BROWSER_FAILED}\n\n{auth_url}\n\n"));
    }
    let callback = tokio::select! {
        callback = wait_for_callback(&listener) => callback?,
        _ = tokio::signal::ctrl_c() => return Err("Error performing login: context canceled".to_owned()),
    };
    call(
        &arguments.api,
        "performing login",
        "PUT",
        "/v1/acl/oidc/complete-auth",
        Some(json!({
            "AuthMethodName": method,
            "RedirectURI": redirect_uri,
            "ClientNonce": nonce,
            "Code": callback.code,
            "State": callback.state,
            "Iss": callback.iss,
        })),
    )
    .await
}

/// Opens `url` in the desktop's browser.
fn open_browser(url: &str) -> Result<(), String> {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let status = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|error| format!("exec: \"{opener}\": {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{opener} {status}"))
    }
}

struct Callback {
    code: String,
    state: String,
    iss: String,
}

/// Serves the callback listener until the provider's redirect arrives at `/oidc/callback`.
async fn wait_for_callback(listener: &tokio::net::TcpListener) -> Result<Callback, String> {
    loop {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|error| format!("Error performing login: {error}"))?;
        let mut request = Vec::new();
        let mut buffer = [0u8; 4096];
        while !request.windows(4).any(|window| window == b"\r\n\r\n") && request.len() < 65536 {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(read) => request.extend_from_slice(&buffer[..read]),
            }
        }
        let text = String::from_utf8_lossy(&request);
        let target = text.split_whitespace().nth(1).unwrap_or("").to_owned();
        let (path, query) = target.split_once('?').unwrap_or((target.as_str(), ""));
        if path != "/oidc/callback" {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let parameter = |name: &str| {
            query
                .split('&')
                .filter_map(|pair| pair.split_once('='))
                .find(|(key, _)| *key == name)
                .map(|(_, value)| query_unescape(value))
                .unwrap_or_default()
        };
        let callback = Callback {
            code: parameter("code"),
            state: parameter("state"),
            iss: parameter("iss"),
        };
        let page = "<!DOCTYPE html><html><head><title>OIDC Authentication Succeeded</title></head><body><p>Signed in via your OIDC provider. You can close this window and return to the terminal.</p></body></html>";
        let _ = stream
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                )
                .as_bytes(),
            )
            .await;
        return Ok(callback);
    }
}
