//! `formatdate`, `cidrsubnets`, `bcrypt` and `rsadecrypt`: the functions of Nomad's jobspec
//! that compute on dates, address ranges and keys rather than on HCL values.
//!
//! Each follows its namesake in go-cty's standard library or go-cty-funcs, messages included
//! where a user sees them. Not here: functions reading files (`resolve_calls`) or taking a type
//! (`convert`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use drover_structs::time::civil_from_days;
use hcl::Value;
use hcl::eval::{Context, FuncArgs, FuncDef, ParamType};

use super::{parse_rfc3339, text, whole_number};

pub(super) fn declare(context: &mut Context<'_>) {
    context.declare_func(
        "formatdate",
        FuncDef::builder()
            .param(ParamType::String)
            .param(ParamType::String)
            .build(|arguments| {
                format_date(&text(&arguments, 0)?, &text(&arguments, 1)?).map(Value::String)
            }),
    );
    context.declare_func(
        "cidrsubnets",
        FuncDef::builder()
            .param(ParamType::String)
            .variadic_param(ParamType::Number)
            .build(|arguments| {
                let prefix = text(&arguments, 0)?;
                let new_bits = (1..arguments.len())
                    .map(|index| whole_number(&arguments, index))
                    .collect::<Result<Vec<i64>, String>>()?;
                cidr_subnets(&prefix, &new_bits)
                    .map(|subnets| Value::Array(subnets.into_iter().map(Value::String).collect()))
            }),
    );
    context.declare_func(
        "bcrypt",
        FuncDef::builder()
            .param(ParamType::String)
            .variadic_param(ParamType::Number)
            .build(|arguments| bcrypt_hash(&arguments).map(Value::String)),
    );
    context.declare_func(
        "rsadecrypt",
        FuncDef::builder()
            .param(ParamType::String)
            .param(ParamType::String)
            .build(|arguments| {
                rsa_decrypt(&text(&arguments, 0)?, &text(&arguments, 1)?).map(Value::String)
            }),
    );
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// The pieces of a `formatdate` spec: a quoted literal (quotes included), a run of one letter
/// (a verb), or a run of anything else (copied as is).
fn split_date_format(spec: &str) -> Vec<&str> {
    let bytes = spec.as_bytes();
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < bytes.len() {
        let first = bytes[start];
        let mut end = start + 1;
        if first == b'\'' {
            if bytes.get(end) == Some(&b'\'') {
                end += 1;
            } else {
                // Up to the closing quote, a doubled quote being an escaped one.
                while end < bytes.len() {
                    if bytes[end] == b'\'' {
                        if bytes.get(end + 1) == Some(&b'\'') {
                            end += 2;
                            continue;
                        }
                        end += 1;
                        break;
                    }
                    end += 1;
                }
            }
        } else if first.is_ascii_alphabetic() {
            while end < bytes.len() && bytes[end] == first {
                end += 1;
            }
        } else {
            while end < bytes.len() && bytes[end] != b'\'' && !bytes[end].is_ascii_alphabetic() {
                end += 1;
            }
        }
        // Every boundary is at an ASCII byte or the end, so the slice is on char boundaries.
        pieces.push(&spec[start..end]);
        start = end;
    }
    pieces
}

/// go-cty's `formatdate`: Terraform's date format verbs over an RFC 3339 timestamp, in the
/// timestamp's own offset.
pub(super) fn format_date(spec: &str, timestamp: &str) -> Result<String, String> {
    let (seconds, _, offset) = parse_rfc3339(timestamp)
        .ok_or_else(|| format!("formatdate: {timestamp:?} is not a valid RFC3339 timestamp"))?;
    let local = seconds + offset;
    let days = local.div_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let second_of_day = local.rem_euclid(86_400);
    let (hour, minute, second) = (
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60,
    );
    // 1970-01-01 was a Thursday.
    let weekday = WEEKDAYS[usize::try_from((days + 4).rem_euclid(7)).unwrap_or(0)];
    let month_name = MONTHS[usize::try_from(month - 1).unwrap_or(0)];
    let twelve_hour = match hour % 12 {
        0 => 12,
        other => other,
    };
    let offset_sign = if offset < 0 { '-' } else { '+' };
    let offset_hours = offset.abs() / 3600;
    let offset_minutes = offset.abs() % 3600 / 60;
    let mut out = String::new();
    for piece in split_date_format(spec) {
        let first = piece.as_bytes()[0];
        let invalid = |what: &str| {
            Err(format!(
                "formatdate: invalid date format verb {piece:?}{}",
                if what.is_empty() {
                    String::new()
                } else {
                    format!(": {what}")
                }
            ))
        };
        if first == b'\'' {
            if piece == "''" {
                out.push('\'');
            } else if piece.len() == 1 || !piece.ends_with('\'') {
                return Err("formatdate: unterminated literal '".to_string());
            } else {
                out.push_str(&piece[1..piece.len() - 1].replace("''", "'"));
            }
            continue;
        }
        if !first.is_ascii_alphabetic() {
            out.push_str(piece);
            continue;
        }
        let formatted = match (first, piece.len()) {
            (b'Y', 2) => format!("{:02}", year.rem_euclid(100)),
            (b'Y', 4) => format!("{year:04}"),
            (b'Y', _) => return invalid("year must either be \"YY\" or \"YYYY\""),
            (b'M', 1) => month.to_string(),
            (b'M', 2) => format!("{month:02}"),
            (b'M', 3) => month_name[..3].to_string(),
            (b'M', 4) => month_name.to_string(),
            (b'M', _) => {
                return invalid("month must be \"M\", \"MM\", \"MMM\", or \"MMMM\"");
            }
            (b'D', 1) => day.to_string(),
            (b'D', 2) => format!("{day:02}"),
            (b'D', _) => return invalid("day of month must either be \"D\" or \"DD\""),
            (b'E', 3) => weekday[..3].to_string(),
            (b'E', 4) => weekday.to_string(),
            (b'E', _) => return invalid("day of week must either be \"EEE\" or \"EEEE\""),
            (b'h', 1) => hour.to_string(),
            (b'h', 2) => format!("{hour:02}"),
            (b'h', _) => return invalid("24-hour must either be \"h\" or \"hh\""),
            (b'H', 1) => twelve_hour.to_string(),
            (b'H', 2) => format!("{twelve_hour:02}"),
            (b'H', _) => return invalid("12-hour must either be \"H\" or \"HH\""),
            (b'A' | b'a', 2) => {
                let marker = if hour < 12 { "AM" } else { "PM" };
                if first == b'A' {
                    marker.to_string()
                } else {
                    marker.to_ascii_lowercase()
                }
            }
            (b'A' | b'a', _) => {
                let letter = char::from(first);
                return invalid(&format!("must be \"{letter}{letter}\""));
            }
            (b'm', 1) => minute.to_string(),
            (b'm', 2) => format!("{minute:02}"),
            (b'm', _) => return invalid("minute must either be \"m\" or \"mm\""),
            (b's', 1) => second.to_string(),
            (b's', 2) => format!("{second:02}"),
            (b's', _) => return invalid("second must either be \"s\" or \"ss\""),
            (b'Z', 1) if offset == 0 => "Z".to_string(),
            (b'Z', 1 | 5) => format!("{offset_sign}{offset_hours:02}:{offset_minutes:02}"),
            (b'Z', 3) if offset == 0 => "UTC".to_string(),
            (b'Z', 3 | 4) => format!("{offset_sign}{offset_hours:02}{offset_minutes:02}"),
            (b'Z', _) => return invalid("timezone must be Z, ZZZZ, or ZZZZZ"),
            _ => return invalid(""),
        };
        out.push_str(&formatted);
    }
    Ok(out)
}

/// An address as a number of `width` bits (32 or 128).
fn address_bits(address: IpAddr) -> (u128, u32) {
    match address {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

fn address_text(bits: u128, width: u32) -> String {
    if width == 32 {
        // A 32-bit address fits in u32: it came from one or was masked to 32 bits.
        Ipv4Addr::from(u32::try_from(bits & u128::from(u32::MAX)).unwrap_or(0)).to_string()
    } else {
        Ipv6Addr::from(bits).to_string()
    }
}

/// The bits below a prefix of `length` in an address of `width` bits.
fn host_mask(length: u32, width: u32) -> u128 {
    let host_bits = width - length;
    if host_bits == 128 {
        u128::MAX
    } else {
        (1u128 << host_bits) - 1
    }
}

fn all_ones(width: u32) -> u128 {
    host_mask(0, width)
}

/// Parses `a.b.c.d/n` or `x::/n` as Go's `net.ParseCIDR`: the network (host bits cleared),
/// its prefix length and the address width.
fn parse_cidr(prefix: &str) -> Result<(u128, u32, u32), String> {
    let invalid = || format!("invalid CIDR expression: invalid CIDR address: {prefix}");
    let (address, length) = prefix.split_once('/').ok_or_else(invalid)?;
    let address: IpAddr = address.parse().map_err(|_| invalid())?;
    let (bits, width) = address_bits(address);
    let length: u32 = length
        .parse()
        .ok()
        .filter(|length| *length <= width && !prefix.contains("/+"))
        .ok_or_else(invalid)?;
    Ok((bits & !host_mask(length, width), length, width))
}

/// go-cty-funcs' `cidrsubnets`: consecutive subnets of `prefix`, each `new_bits` longer than
/// it, each starting at the first address after the previous one that is aligned to its size.
pub(super) fn cidr_subnets(prefix: &str, new_bits: &[i64]) -> Result<Vec<String>, String> {
    let (network, prefix_length, width) = parse_cidr(prefix)?;
    if new_bits.is_empty() {
        return Ok(Vec::new());
    }
    let lengths = new_bits
        .iter()
        .enumerate()
        .map(|(index, bits)| {
            let length = i64::from(prefix_length) + bits;
            if *bits < 1 {
                return Err(format!(
                    "cidrsubnets: argument {}: must extend prefix by at least one bit",
                    index + 2
                ));
            }
            if length > i64::from(width) {
                let family = if width == 32 { "IPv4" } else { "IPv6" };
                return Err(format!(
                    "cidrsubnets: argument {}: would extend prefix to {length} bits, which is too long for an {family} address",
                    index + 2
                ));
            }
            // Checked against the width (at most 128) just above.
            Ok(u32::try_from(length).unwrap_or(width))
        })
        .collect::<Result<Vec<u32>, String>>()?;
    // The subnet just before the network, at the first length: the search starts after it.
    let mut current_address = network.wrapping_sub(1) & all_ones(width);
    let mut current_length = lengths[0];
    current_address &= !host_mask(current_length, width);
    let network_mask = !host_mask(prefix_length, width) & all_ones(width);
    let mut subnets = Vec::with_capacity(lengths.len());
    for (index, length) in lengths.iter().copied().enumerate() {
        let current_last = current_address | host_mask(current_length, width);
        let aligned_last = (current_last & !host_mask(length, width)) | host_mask(length, width);
        let next = aligned_last.wrapping_add(1) & all_ones(width);
        let rolled_over = aligned_last == all_ones(width);
        if rolled_over || next & network_mask != network {
            return Err(format!(
                "cidrsubnets: argument {}: not enough remaining address space for a subnet with a prefix of {length} bits after {}/{current_length}",
                index + 2,
                address_text(current_address, width)
            ));
        }
        subnets.push(format!("{}/{length}", address_text(next, width)));
        current_address = next;
        current_length = length;
    }
    Ok(subnets)
}

/// go-cty-funcs' `bcrypt`: a `$2a$` hash of the string with a random salt, at cost 10 unless
/// given.
fn bcrypt_hash(arguments: &FuncArgs) -> Result<String, String> {
    let password = text(arguments, 0)?;
    let cost = match arguments.len() {
        // Go's bcrypt.DefaultCost (the crate's default is higher).
        1 => 10,
        2 => {
            let cost = whole_number(arguments, 1)?;
            u32::try_from(cost)
                .ok()
                .filter(|cost| (4..=31).contains(cost))
                .ok_or_else(|| {
                    format!("bcrypt: crypto/bcrypt: cost {cost} is outside allowed range (4,31)")
                })?
        }
        _ => return Err("bcrypt: at most one cost argument".to_string()),
    };
    let hash = bcrypt::hash_with_result(password.as_bytes(), cost)
        .map_err(|error| format!("bcrypt: {error}"))?;
    Ok(hash.format_for_version(bcrypt::Version::TwoA))
}

/// go-cty-funcs' `rsadecrypt`: base64 ciphertext, PKCS #1 v1.5 padding, with a PEM private key
/// (PKCS #1 `RSA PRIVATE KEY` or PKCS #8 `PRIVATE KEY`).
fn rsa_decrypt(ciphertext: &str, key_pem: &str) -> Result<String, String> {
    use base64::Engine as _;
    use rsa::pkcs1::DecodeRsaPrivateKey as _;
    use rsa::pkcs8::DecodePrivateKey as _;

    let ciphertext = base64::engine::general_purpose::STANDARD
        .decode(ciphertext.trim())
        .map_err(|_| {
            "rsadecrypt: failed to decode input: the ciphertext is not base64".to_string()
        })?;
    let key = rsa::PrivateKey::from_pkcs1_pem(key_pem)
        .or_else(|_| rsa::PrivateKey::from_pkcs8_pem(key_pem))
        .map_err(|_| {
            "rsadecrypt: invalid private key: expected a PEM RSA private key (PKCS #1 or PKCS #8)"
                .to_string()
        })?;
    let plain = key
        .decrypt(rsa::Pkcs1v15Encrypt, &ciphertext)
        .map_err(|_| "rsadecrypt: failed to decrypt: crypto/rsa: decryption error".to_string())?;
    String::from_utf8(plain)
        .map_err(|_| "rsadecrypt: the decrypted text is not valid UTF-8".to_string())
}
