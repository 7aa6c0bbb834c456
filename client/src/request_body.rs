//! A request body as a list of shared pieces.
//!
//! The N refine prompts of a problem and its two memory-agent prompts quote the same
//! rollouts (~350 KB at evaluation sizes), and a candidate's M verifications quote its
//! solution. Encoded into one buffer per call, every call in flight held its own copy of
//! that escaped text: at 10,000 calls in flight, gigabytes of the same bytes. Here a body
//! is the short parts written for this call (the model name, roles, template text, the
//! sampling numbers) and, between them, the escaped long segments themselves as [`Bytes`]
//! shared with every other body that quotes them (from [`super::escape_cache`]). The
//! bytes on the wire are the same; memory in flight follows the distinct text, not the
//! number of calls.
//!
//! Sent with an exact length (`Content-Length`, never chunked), one piece per frame.
//!
//! ```
//! use bytes::Bytes;
//! use tmas_client::RequestBody;
//!
//! let shared = Bytes::from_static(b"a long escaped rollout");
//! let body = RequestBody::from_pieces(vec![
//!     Bytes::from_static(b"{\"content\":\""),
//!     shared.clone(),
//!     Bytes::from_static(b"\"}"),
//! ]);
//! assert_eq!(body.len(), 36);
//! assert_eq!(&body.to_bytes()[..], b"{\"content\":\"a long escaped rollout\"}");
//! ```

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Frame, SizeHint};

/// The bytes of one request body, as pieces that other bodies may share.
#[derive(Clone, Default)]
pub struct RequestBody {
    pieces: Arc<[Bytes]>,
    len: usize,
}

impl RequestBody {
    /// The body made of `pieces`, in order (empty pieces are dropped).
    pub fn from_pieces(pieces: Vec<Bytes>) -> Self {
        let pieces: Arc<[Bytes]> = pieces.into_iter().filter(|p| !p.is_empty()).collect();
        let len = pieces.iter().map(Bytes::len).sum();
        Self { pieces, len }
    }

    /// Bytes on the wire.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pieces, in order.
    pub fn pieces(&self) -> &[Bytes] {
        &self.pieces
    }

    /// The body as one contiguous buffer: the piece itself when there is one, else a copy.
    pub fn to_bytes(&self) -> Bytes {
        match &*self.pieces {
            [] => Bytes::new(),
            [only] => only.clone(),
            many => {
                let mut out = BytesMut::with_capacity(self.len);
                for piece in many {
                    out.extend_from_slice(piece);
                }
                out.freeze()
            }
        }
    }

    /// The body for one HTTP attempt (the pieces are shared, not copied).
    pub(crate) fn http_body(&self) -> reqwest::Body {
        match &*self.pieces {
            [] => reqwest::Body::from(Bytes::new()),
            [only] => reqwest::Body::from(only.clone()),
            _ => reqwest::Body::wrap(Sending {
                pieces: self.pieces.clone(),
                next: 0,
                remaining: self.len as u64,
            }),
        }
    }
}

impl From<Bytes> for RequestBody {
    fn from(bytes: Bytes) -> Self {
        Self::from_pieces(vec![bytes])
    }
}

impl std::fmt::Debug for RequestBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestBody")
            .field("len", &self.len)
            .field("pieces", &self.pieces.len())
            .finish()
    }
}

/// One attempt's reading position in a body.
struct Sending {
    pieces: Arc<[Bytes]>,
    next: usize,
    remaining: u64,
}

impl http_body::Body for Sending {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        let Some(piece) = this.pieces.get(this.next).cloned() else {
            return Poll::Ready(None);
        };
        this.next += 1;
        this.remaining = this.remaining.saturating_sub(piece.len() as u64);
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.next >= self.pieces.len()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    fn body(parts: &[&'static [u8]]) -> RequestBody {
        RequestBody::from_pieces(parts.iter().map(|p| Bytes::from_static(p)).collect())
    }

    #[test]
    fn length_and_bytes_are_the_pieces_in_order() {
        let b = body(&[b"ab", b"", b"cde", b"f"]);
        assert_eq!(b.len(), 6);
        assert_eq!(b.pieces().len(), 3, "empty pieces are dropped");
        assert_eq!(&b.to_bytes()[..], b"abcdef");
        assert!(RequestBody::default().is_empty());
        assert_eq!(&RequestBody::default().to_bytes()[..], b"");
        let one = Bytes::from_static(b"only");
        assert_eq!(
            RequestBody::from(one.clone()).to_bytes().as_ptr(),
            one.as_ptr()
        );
    }

    #[tokio::test]
    async fn an_attempt_sends_every_piece_with_an_exact_length() {
        for b in [body(&[b"ab", b"cde", b"f"]), body(&[b"single"]), body(&[])] {
            let http = b.http_body();
            assert_eq!(
                http_body::Body::size_hint(&http).exact(),
                Some(b.len() as u64)
            );
            let sent = http.collect().await.map(|c| c.to_bytes());
            assert_eq!(sent.ok().as_deref(), Some(&b.to_bytes()[..]));
        }
    }
}
