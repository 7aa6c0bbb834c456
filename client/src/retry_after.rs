//! `Retry-After` (RFC 9110 §10.2.3): a number of seconds or an HTTP date.
//!
//! Overloaded servers (vLLM and SGLang behind a bounded queue, gateways, hosted APIs) say
//! when to come back; honouring that is what lets their queue drain. Fractional seconds
//! are accepted (some proxies send them); a date in the past means "now".

use std::time::{Duration, SystemTime};

/// Longest wait a server may ask for before we cap it.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// The wait a `Retry-After` value asks for, measured from `now`; `None` if unreadable.
pub(crate) fn parse(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0)
            .then(|| Duration::from_secs_f64(secs.min(MAX_RETRY_AFTER.as_secs_f64())));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(now)
            .unwrap_or(Duration::ZERO)
            .min(MAX_RETRY_AFTER),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        assert_eq!(parse("1", now), Some(Duration::from_secs(1)));
        assert_eq!(parse(" 2.5 ", now), Some(Duration::from_millis(2500)));
        assert_eq!(parse("99999", now), Some(MAX_RETRY_AFTER));
        assert_eq!(parse("-1", now), None);
        assert_eq!(parse("soon", now), None);
        // 1445412480 is Wed, 21 Oct 2015 07:28:00 GMT.
        assert_eq!(
            parse("Wed, 21 Oct 2015 07:28:07 GMT", now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            parse("Wed, 21 Oct 2015 07:27:00 GMT", now),
            Some(Duration::ZERO),
            "a date in the past: retry now"
        );
    }
}
