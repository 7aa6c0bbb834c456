//! `tmas bench dedup`: how well each bank de-duplication rule tells paraphrased duplicates
//! from distinct items that share words and formulas, on labelled pairs.
//!
//! The pairs (`data/bank-pairs.jsonl`: `{"a", "b", "duplicate", "kind"}`) are bank items
//! as a run writes them: half are one fact or strategy in other words (synonyms, LaTeX
//! against Unicode spellings), half are distinct items that share most of their words
//! (a number, a sign, a relation, a negation or an opposite word apart, or another method
//! on the same object). The rules:
//!
//! - **lexical**: the bank's math-aware similarity ([`ItemFeatures::similarity`]) at its
//!   threshold;
//! - **embedding**: the cosine of the raw items' sentence embeddings above a threshold
//!   (what RSE's released code does), when `--embeddings URL` names an embeddings server;
//! - **meaning**: [`DuplicateRule`]: lexical, or the cosine of the canonical spellings'
//!   embeddings, never when the conflict check separates the items.
//!
//! The embeddings go through the model client like every call of a run.
//! `scripts/embedding_server.py` serves all-MiniLM-L6-v2 on the CPU for this.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tmas_client::wire::{CallTags, EmbeddingRequest};
use tmas_client::{ClientConfig, ModelClient};

use crate::method::banks::ItemFeatures;
use crate::method::banks::similarity::{DuplicateRule, canonical, cosine};

#[derive(Debug, Clone, clap::Args)]
pub struct DedupBenchArgs {
    /// Labelled pairs, one JSON object per line: `a`, `b`, `duplicate` (bool), `kind`.
    #[arg(long, value_name = "FILE", default_value = "data/bank-pairs.jsonl")]
    pub pairs: PathBuf,
    /// An OpenAI-compatible embeddings server (base URL ending in `/v1`), e.g. the one
    /// `scripts/embedding_server.py` starts. Without it only the lexical rule is measured.
    #[arg(long, value_name = "URL")]
    pub embeddings: Option<String>,
    /// The embeddings model to ask for.
    #[arg(long, value_name = "NAME", default_value = "all-MiniLM-L6-v2")]
    pub model: String,
    /// Lexical similarity at or above which items are duplicates.
    #[arg(long, value_name = "S", default_value_t = 0.7)]
    pub lexical: f64,
    /// Cosine at or above which items are duplicates (embedding and meaning rules).
    #[arg(long, value_name = "C", default_value_t = 0.8)]
    pub cosine: f64,
}

/// One labelled pair.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pair {
    pub a: String,
    pub b: String,
    pub duplicate: bool,
    pub kind: String,
}

/// Reads the pairs, naming the file and line of anything wrong.
pub fn read_pairs(path: &Path) -> anyhow::Result<Vec<Pair>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut pairs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let pair: Pair = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not a labelled pair", path.display(), i + 1))?;
        pairs.push(pair);
    }
    anyhow::ensure!(!pairs.is_empty(), "{}: no pairs", path.display());
    Ok(pairs)
}

/// How one rule did: duplicates found and distinct pairs merged, in all and by kind.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize)]
pub struct Score {
    pub duplicates_found: usize,
    pub duplicates: usize,
    pub distinct_merged: usize,
    pub distinct: usize,
    /// kind → (pairs called duplicate, pairs of that kind).
    pub by_kind: std::collections::BTreeMap<String, (usize, usize)>,
}

/// Scores the verdicts `said` (one per pair, true = duplicate) against the labels.
pub fn score(pairs: &[Pair], said: &[bool]) -> Score {
    let mut s = Score::default();
    for (pair, &dup) in pairs.iter().zip(said) {
        if pair.duplicate {
            s.duplicates += 1;
            s.duplicates_found += usize::from(dup);
        } else {
            s.distinct += 1;
            s.distinct_merged += usize::from(dup);
        }
        let entry = s.by_kind.entry(pair.kind.clone()).or_default();
        entry.0 += usize::from(dup);
        entry.1 += 1;
    }
    s
}

fn client_config(base_url: &str, model: &str) -> ClientConfig {
    super::one_endpoint_client(
        "embeddings",
        base_url,
        model,
        "embedding",
        4,
        Duration::from_secs(120),
    )
}

/// The embeddings of `texts`, in order, in one call.
async fn embed(client: &ModelClient, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
    let n = texts.len();
    let request = EmbeddingRequest {
        inputs: texts.into_iter().map(Arc::from).collect(),
        tags: CallTags {
            role: "embedding".into(),
            problem: "bench-dedup".into(),
            ..CallTags::default()
        },
    };
    let response = client
        .embed("embedding", request)
        .await
        .map_err(|e| anyhow::anyhow!("embeddings call failed: {e}"))?;
    let vectors = response
        .embeddings
        .context("the embeddings server's reply has no vectors")?;
    anyhow::ensure!(
        vectors.len() == n,
        "the embeddings server returned {} vectors for {n} inputs",
        vectors.len()
    );
    Ok(vectors.to_vec())
}

/// Measures every rule on the pairs and prints the tables.
pub async fn run(args: DedupBenchArgs) -> anyhow::Result<()> {
    let pairs = read_pairs(&args.pairs)?;
    let features: Vec<(ItemFeatures, ItemFeatures)> = pairs
        .iter()
        .map(|p| (ItemFeatures::of(&p.a), ItemFeatures::of(&p.b)))
        .collect();
    let lexical: Vec<bool> = features
        .iter()
        .map(|(a, b)| a.similarity(b) >= args.lexical)
        .collect();
    let mut rules = vec![(format!("lexical ≥ {}", args.lexical), lexical)];
    if let Some(url) = &args.embeddings {
        let client = ModelClient::start(client_config(url, &args.model))
            .await
            .context("starting the model client")?;
        let raw: Vec<String> = pairs
            .iter()
            .flat_map(|p| [p.a.clone(), p.b.clone()])
            .collect();
        let canonical_texts: Vec<String> = raw.iter().map(|t| canonical(t)).collect();
        let embedded = async {
            let raw = embed(&client, raw).await?;
            let canonical = embed(&client, canonical_texts).await?;
            anyhow::Ok((raw, canonical))
        }
        .await;
        client.shutdown().await;
        let (raw, canonical) = embedded.with_context(|| format!("embedding the pairs at {url}"))?;
        let cosines =
            |v: &[Vec<f32>]| -> Vec<f64> { v.chunks(2).map(|ab| cosine(&ab[0], &ab[1])).collect() };
        let (raw_cos, canonical_cos) = (cosines(&raw), cosines(&canonical));
        let rule = DuplicateRule {
            lexical: args.lexical,
            cosine: args.cosine,
        };
        // RSE's released rule: strictly above the threshold.
        rules.push((
            format!("embedding cosine > {}", args.cosine),
            raw_cos.iter().map(|c| *c > args.cosine).collect(),
        ));
        rules.push((
            format!(
                "meaning (lexical ≥ {}, canonical cosine ≥ {}, no conflict)",
                args.lexical, args.cosine
            ),
            features
                .iter()
                .zip(&canonical_cos)
                .map(|((a, b), c)| rule.duplicates(a, b, Some(*c)))
                .collect(),
        ));
        // The meaning rule across cosine thresholds: how sensitive it is to the choice.
        for threshold in [0.70, 0.75, 0.85, 0.90] {
            let rule = DuplicateRule {
                cosine: threshold,
                ..rule
            };
            rules.push((
                format!("meaning, canonical cosine ≥ {threshold}"),
                features
                    .iter()
                    .zip(&canonical_cos)
                    .map(|((a, b), c)| rule.duplicates(a, b, Some(*c)))
                    .collect(),
            ));
        }
    }
    print_table(&args.pairs, &pairs, &rules);
    Ok(())
}

fn print_table(path: &Path, pairs: &[Pair], rules: &[(String, Vec<bool>)]) {
    println!(
        "bench dedup: {} labelled pairs from {}",
        pairs.len(),
        path.display()
    );
    println!();
    println!("| rule | duplicates found | distinct pairs merged |");
    println!("| --- | ---: | ---: |");
    for (name, said) in rules {
        let s = score(pairs, said);
        println!(
            "| {name} | {} of {} | {} of {} |",
            s.duplicates_found, s.duplicates, s.distinct_merged, s.distinct
        );
    }
    println!();
    let kinds: Vec<(String, bool)> = {
        let mut k: Vec<(String, bool)> = pairs
            .iter()
            .map(|p| (p.kind.clone(), p.duplicate))
            .collect();
        k.sort();
        k.dedup();
        k
    };
    let header: Vec<String> = kinds
        .iter()
        .map(|(k, dup)| format!("{k} ({})", if *dup { "dup" } else { "distinct" }))
        .collect();
    println!("called duplicate, by kind of pair:");
    println!();
    println!("| rule | {} |", header.join(" | "));
    println!("| --- |{}", " ---: |".repeat(kinds.len()));
    for (name, said) in rules {
        let s = score(pairs, said);
        let cells: Vec<String> = kinds
            .iter()
            .map(|(k, _)| {
                let (called, of) = s.by_kind.get(k).copied().unwrap_or_default();
                format!("{called}/{of}")
            })
            .collect();
        println!("| {name} | {} |", cells.join(" | "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(duplicate: bool, kind: &str) -> Pair {
        Pair {
            a: "x".into(),
            b: "y".into(),
            duplicate,
            kind: kind.into(),
        }
    }

    #[test]
    fn scores_count_found_duplicates_and_merged_distinct_pairs() {
        let pairs = [
            pair(true, "rewording"),
            pair(true, "rewording"),
            pair(false, "number"),
            pair(false, "sign"),
        ];
        let s = score(&pairs, &[true, false, true, false]);
        assert_eq!((s.duplicates_found, s.duplicates), (1, 2));
        assert_eq!((s.distinct_merged, s.distinct), (1, 2));
        assert_eq!(s.by_kind["number"], (1, 1));
        assert_eq!(s.by_kind["sign"], (0, 1));
    }

    #[test]
    fn a_bad_line_is_named_by_file_and_line() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("pairs.jsonl");
        std::fs::write(
            &path,
            "{\"a\":\"x\",\"b\":\"y\",\"duplicate\":true,\"kind\":\"k\"}\n{\"a\":\"x\"}\n",
        )
        .expect("write");
        let err = read_pairs(&path).expect_err("line 2 lacks fields");
        assert!(format!("{err:#}").contains("pairs.jsonl:2"), "{err:#}");
    }

    #[test]
    fn the_shipped_pairs_are_balanced_and_the_lexical_rule_merges_few_distinct_ones() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/bank-pairs.jsonl");
        let pairs = read_pairs(&path).expect("pairs");
        let dups = pairs.iter().filter(|p| p.duplicate).count();
        assert!(
            dups >= 30 && pairs.len() - dups >= 30,
            "{dups} of {}",
            pairs.len()
        );
        let said: Vec<bool> = pairs
            .iter()
            .map(|p| ItemFeatures::of(&p.a).similarity(&ItemFeatures::of(&p.b)) >= 0.7)
            .collect();
        let s = score(&pairs, &said);
        assert!(s.distinct_merged <= 2, "{s:?}");
    }

    #[test]
    fn cosine_of_parallel_vectors_is_one_and_of_a_zero_vector_is_zero() {
        assert!((cosine(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-9);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
    }
}
