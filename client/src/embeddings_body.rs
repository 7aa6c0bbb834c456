//! The OpenAI embeddings JSON on the wire: the request body we send
//! (`{"model", "input": [..], "encoding_format": "float"}`) and the reply we accept
//! (`{"data": [{"index", "embedding": [..]}], "usage": {"prompt_tokens", ..}}`). Pure
//! functions, no IO.
//!
//! A reply is used only if it holds exactly one vector per input (placed by `index`,
//! each index once), all of one non-zero dimension, every number finite: a vector in the
//! wrong slot or a NaN would silently change which items count as duplicates, so such a
//! reply is a malformed body (retried like one, then a failure naming the endpoint).

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::body::{BodyProblem, WireUsage};
use crate::wire::Usage;

/// A validated embeddings reply.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingsReply {
    /// One vector per input, in input order.
    pub vectors: Vec<Vec<f32>>,
    pub usage: Usage,
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    input: &'a [Arc<str>],
    /// Explicit, because OpenAI's own client libraries ask for base64 by default and some
    /// proxies follow them.
    encoding_format: &'static str,
}

/// The request body for `model` and `inputs`.
pub fn encode_embeddings_request(
    model: &str,
    inputs: &[Arc<str>],
) -> Result<Bytes, serde_json::Error> {
    serde_json::to_vec(&WireRequest {
        model,
        input: inputs,
        encoding_format: "float",
    })
    .map(Bytes::from)
}

#[derive(Deserialize)]
struct WireItem {
    /// Position of the input this vector embeds; servers that omit it list vectors in
    /// input order.
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

#[derive(Deserialize)]
struct WireReply {
    data: Vec<WireItem>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// Parses and validates the reply to a request of `inputs` inputs.
pub fn parse_embeddings_response(
    body: &[u8],
    inputs: usize,
) -> Result<EmbeddingsReply, BodyProblem> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err("empty body".to_string());
    }
    let reply: WireReply =
        serde_json::from_slice(body).map_err(|e| format!("invalid embeddings JSON: {e}"))?;
    if reply.data.len() != inputs {
        return Err(format!(
            "{} vectors in `data` for {inputs} inputs",
            reply.data.len()
        ));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; inputs];
    for (position, item) in reply.data.into_iter().enumerate() {
        let index = item.index.unwrap_or(position);
        let Some(slot) = slots.get_mut(index) else {
            return Err(format!(
                "`data[{position}].index` is {index}, but there are only {inputs} inputs"
            ));
        };
        if slot.is_some() {
            return Err(format!("two vectors for input {index}"));
        }
        *slot = Some(item.embedding);
    }
    // Every slot is filled: `inputs` distinct in-range indices for `inputs` items.
    let vectors: Vec<Vec<f32>> = slots.into_iter().flatten().collect();
    check_vectors(&vectors)?;
    Ok(EmbeddingsReply {
        vectors,
        usage: reply.usage.map(Usage::from).unwrap_or_default(),
    })
}

/// Every vector non-empty, of the first one's dimension, and finite. (The JSON reader
/// already refuses numbers beyond `f32`'s range; this also holds for vectors from any
/// other source.)
fn check_vectors(vectors: &[Vec<f32>]) -> Result<(), BodyProblem> {
    let dimensions = vectors.first().map_or(0, Vec::len);
    for (i, v) in vectors.iter().enumerate() {
        if v.is_empty() {
            return Err(format!("the vector of input {i} is empty"));
        }
        if v.len() != dimensions {
            return Err(format!(
                "the vector of input {i} has {} dimensions, that of input 0 has {dimensions}",
                v.len()
            ));
        }
        if let Some(j) = v.iter().position(|x| !x.is_finite()) {
            return Err(format!(
                "the vector of input {i} holds a non-finite number at position {j}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(body: &str, inputs: usize) -> String {
        match parse_embeddings_response(body.as_bytes(), inputs) {
            Ok(r) => panic!("accepted {body}: {r:?}"),
            Err(p) => p,
        }
    }

    #[test]
    fn the_request_body_is_the_openai_shape() {
        let inputs: Vec<Arc<str>> = vec!["a \"q\"".into(), "b\n".into()];
        let body = encode_embeddings_request("bge-m3", &inputs).unwrap();
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            r#"{"model":"bge-m3","input":["a \"q\"","b\n"],"encoding_format":"float"}"#
        );
    }

    #[test]
    fn vectors_are_placed_by_index_and_usage_is_read() {
        let body = r#"{"object":"list","data":[
            {"object":"embedding","index":1,"embedding":[0.5,-1]},
            {"object":"embedding","index":0,"embedding":[1e-3,2.25]}],
            "model":"m","usage":{"prompt_tokens":7,"total_tokens":7}}"#;
        let r = parse_embeddings_response(body.as_bytes(), 2).unwrap();
        assert_eq!(r.vectors, vec![vec![1e-3, 2.25], vec![0.5, -1.0]]);
        assert_eq!(r.usage.prompt_tokens, 7);
        assert_eq!(r.usage.completion_tokens, 0);
        // No index: input order; no usage: zero (the strategy estimates it).
        let body = r#"{"data":[{"embedding":[1,0]},{"embedding":[0,1]}]}"#;
        let r = parse_embeddings_response(body.as_bytes(), 2).unwrap();
        assert_eq!(r.vectors, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        assert_eq!(r.usage, Usage::default());
    }

    #[test]
    fn every_way_a_reply_can_be_wrong_is_named() {
        let one = |v: &str| format!(r#"{{"data":[{{"index":0,"embedding":{v}}}]}}"#);
        let cases: Vec<(String, usize, &str)> = vec![
            ("  ".into(), 1, "empty body"),
            ("{\"data\": [".into(), 1, "invalid embeddings JSON"),
            (r#"{"choices":[]}"#.into(), 1, "missing field `data`"),
            (one("[1,2]"), 2, "1 vectors in `data` for 2 inputs"),
            (
                r#"{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[2]}]}"#.into(),
                2,
                "two vectors for input 0",
            ),
            (
                r#"{"data":[{"index":3,"embedding":[1]}]}"#.into(),
                1,
                "`data[0].index` is 3, but there are only 1 inputs",
            ),
            (
                r#"{"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1]}]}"#.into(),
                2,
                "input 1 has 1 dimensions, that of input 0 has 2",
            ),
            (one("[]"), 1, "the vector of input 0 is empty"),
            // Beyond f32's range.
            (one("[1, 1e39]"), 1, "number out of range"),
            // base64 vectors (what OpenAI's client libraries ask for by default).
            (one("\"AACAPw==\""), 1, "expected a sequence"),
        ];
        for (body, inputs, want) in cases {
            let got = problem(&body, inputs);
            assert!(got.contains(want), "{body}: {got}");
        }
    }

    #[test]
    fn non_finite_numbers_are_refused() {
        let ok = vec![vec![1.0, 2.0], vec![0.0, -1.0]];
        assert_eq!(check_vectors(&ok), Ok(()));
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let got = check_vectors(&[vec![1.0, 2.0], vec![0.0, bad]]).unwrap_err();
            assert!(
                got.contains("input 1 holds a non-finite number at position 1"),
                "{got}"
            );
        }
    }

    #[test]
    fn vectors_survive_a_json_round_trip_bit_for_bit() {
        // The run store keeps vectors as JSON text; a resumed run must read back the very
        // numbers the first run decided with.
        let mut x = 0x1234_5678_u32;
        let vector: Vec<f32> = (0..4000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let v = f32::from_bits(x);
                if v.is_finite() { v } else { 1.0 / (x as f32) }
            })
            .collect();
        let text = serde_json::to_string(&[&vector]).unwrap();
        let body = format!(
            r#"{{"data":[{{"embedding":{}}}]}}"#,
            &text[1..text.len() - 1]
        );
        let back = parse_embeddings_response(body.as_bytes(), 1).unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back.vectors[0]), bits(&vector));
    }
}
