//! One embeddings attempt: `POST {base_url}/embeddings`, the reply read whole (it is
//! small) and validated. Failures are the chat attempt's: a refused connection, a status,
//! a timeout, a malformed body (which includes a reply with the wrong vectors).

use bytes::Bytes;
use reqwest::header::{CONTENT_TYPE, HeaderMap};

use super::{AttemptError, Endpoint};
use crate::embeddings_body::{EmbeddingsReply, parse_embeddings_response};

impl Endpoint {
    /// One HTTP attempt for `inputs` inputs. The caller holds the in-flight permits;
    /// `timeout_scale` (≥ 1) stretches the request timeout after earlier timeouts.
    pub async fn attempt_embeddings(
        &self,
        body: Bytes,
        headers: HeaderMap,
        timeout_scale: f64,
        inputs: usize,
    ) -> Result<EmbeddingsReply, AttemptError> {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let after = self.spec.request_timeout.mul_f64(timeout_scale.max(1.0));
        let req = self
            .request(&self.embeddings_url, reqwest::Method::POST)
            .header(CONTENT_TYPE, "application/json")
            .headers(headers)
            .body(body);
        let attempt = async {
            let resp = req.send().await.map_err(|e| self.connect_error(&e))?;
            let status = resp.status();
            if !status.is_success() {
                return Err(self.status_error(resp).await);
            }
            let body = resp.bytes().await.map_err(|e| self.connect_error(&e))?;
            parse_embeddings_response(&body, inputs)
                .map_err(|p| self.malformed(status.as_u16(), &p, &body).into())
        };
        match tokio::time::timeout(after, attempt).await {
            Ok(r) => r,
            Err(_) => Err(self.timeout(after).into()),
        }
    }
}
