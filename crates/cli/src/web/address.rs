//! `--web ADDR`: an IP address and a port (`127.0.0.1:8080`, `[::1]:8080`, or
//! `localhost:8080` for `127.0.0.1`), checked before anything runs. Port 0 asks the system
//! for a free one; the bound address is printed.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// A checked `--web` address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebAddress(pub SocketAddr);

/// What every refusal says the option takes.
const TAKES: &str = "must be IP:PORT with a port 0..=65535 (0: any free port), e.g. \
                     127.0.0.1:8080, [::1]:8080 or localhost:8080";

/// Why a `--web` value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebAddressError {
    /// No `:PORT`.
    #[error("no port; {TAKES}")]
    NoPort,
    /// The port is not a whole number.
    #[error("the port {port:?} is not a whole number; {TAKES}")]
    PortNotWhole {
        /// As given.
        port: String,
    },
    /// The port is past 65535.
    #[error("the port {port} is too large; {TAKES}")]
    PortTooLarge {
        /// As given.
        port: String,
    },
    /// An IPv6 address without brackets.
    #[error("an IPv6 address takes brackets: [{host}]:{port}; {TAKES}")]
    Ipv6WithoutBrackets {
        /// The address.
        host: std::net::Ipv6Addr,
        /// The port.
        port: u16,
    },
    /// A host name (only `localhost` is known; nothing is looked up).
    #[error("{host:?} is not an IP address (host names other than localhost are not looked up); {TAKES}")]
    NotAnAddress {
        /// As given.
        host: String,
    },
}

/// Parses `--web`'s value (clap's value parser).
pub fn parse(text: &str) -> Result<WebAddress, WebAddressError> {
    let t = text.trim();
    if let Ok(addr) = t.parse::<SocketAddr>() {
        return Ok(WebAddress(addr));
    }
    let Some((host, port)) = t.rsplit_once(':') else {
        return Err(WebAddressError::NoPort);
    };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(WebAddressError::PortNotWhole { port: port.into() });
    }
    let Ok(port) = port.parse::<u16>() else {
        return Err(WebAddressError::PortTooLarge { port: port.into() });
    };
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(WebAddress(SocketAddr::new(
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            port,
        )));
    }
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(host)) => Err(WebAddressError::Ipv6WithoutBrackets { host, port }),
        _ => Err(WebAddressError::NotAnAddress { host: host.into() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_any_and_localhost_addresses_parse_with_any_port() {
        let ok = |t: &str| parse(t).expect(t).0.to_string();
        assert_eq!(ok("127.0.0.1:8080"), "127.0.0.1:8080");
        assert_eq!(ok("127.0.0.1:0"), "127.0.0.1:0");
        assert_eq!(ok("[::1]:65535"), "[::1]:65535");
        assert_eq!(ok("localhost:9"), "127.0.0.1:9");
        assert_eq!(ok("0.0.0.0:80"), "0.0.0.0:80");
    }

    #[test]
    fn a_missing_bad_or_too_large_port_and_host_names_are_refused_saying_what_it_takes() {
        for (text, why) in [
            ("127.0.0.1", "no port"),
            ("8080", "no port"),
            ("", "no port"),
            ("127.0.0.1:65536", "too large"),
            ("127.0.0.1:-1", "not a whole number"),
            ("127.0.0.1:", "not a whole number"),
            ("127.0.0.1:http", "not a whole number"),
            ("example.org:80", "not an IP address"),
            ("::1:80", "takes brackets: [::1]:80"),
        ] {
            let err = parse(text).expect_err(text).to_string();
            assert!(err.contains(why), "{text}: {err}");
            assert!(
                err.contains("IP:PORT") && err.contains("0..=65535"),
                "{err}"
            );
        }
    }
}
