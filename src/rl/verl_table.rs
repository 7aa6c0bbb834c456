//! verl's training-data layout as an Arrow schema, and the parquet file `tmas rl-data`
//! writes (Snappy-compressed, one row group per 1,024 rows).
//!
//! | column | type |
//! | --- | --- |
//! | `data_source` | utf8 |
//! | `prompt` | list<struct<role: utf8, content: utf8>> (chat messages) |
//! | `ability` | utf8 (`math`) |
//! | `reward_model` | struct<ground_truth: utf8, style: utf8 (`rule`)> |
//! | `extra_info` | struct<split, index, ability, question_id, question, iteration, run, experience_bank: list<utf8>, guideline_bank: list<utf8>, bank_prompt: utf8 (nullable), _source> |
//! | `_source` | utf8 (`normal` / `experience` / `guideline`) |
//!
//! `docs/rl.md` explains each column.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::{ArrayRef, Int64Array, ListArray, RecordBatch, StringArray, StructArray};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use super::data::Instance;

/// `extra_info.split` of every row.
pub const SPLIT: &str = "train";
/// `ability` of every row.
pub const ABILITY: &str = "math";
/// `reward_model.style`: the answer is checked against `ground_truth` (by `tmas rl-score`).
pub const REWARD_STYLE: &str = "rule";

const ROW_GROUP_ROWS: usize = 1024;

fn utf8(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Utf8, nullable)
}

fn string_list(name: &str) -> Field {
    Field::new(
        name,
        DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
        false,
    )
}

fn message_fields() -> Fields {
    Fields::from(vec![utf8("role", false), utf8("content", false)])
}

fn reward_model_fields() -> Fields {
    Fields::from(vec![utf8("ground_truth", false), utf8("style", false)])
}

fn extra_info_fields() -> Fields {
    Fields::from(vec![
        utf8("split", false),
        Field::new("index", DataType::Int64, false),
        utf8("ability", false),
        utf8("question_id", false),
        utf8("question", false),
        Field::new("iteration", DataType::Int64, false),
        utf8("run", false),
        string_list("experience_bank"),
        string_list("guideline_bank"),
        utf8("bank_prompt", true),
        utf8("_source", false),
    ])
}

/// The schema of the file.
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        utf8("data_source", false),
        Field::new(
            "prompt",
            DataType::List(Arc::new(Field::new(
                "item",
                DataType::Struct(message_fields()),
                true,
            ))),
            false,
        ),
        utf8("ability", false),
        Field::new(
            "reward_model",
            DataType::Struct(reward_model_fields()),
            false,
        ),
        Field::new("extra_info", DataType::Struct(extra_info_fields()), false),
        utf8("_source", false),
    ]))
}

fn strings<'a>(values: impl Iterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(values))
}

fn string_lists<'a>(lists: impl Iterator<Item = &'a [String]>) -> ArrayRef {
    let mut builder = ListBuilder::new(StringBuilder::new());
    for list in lists {
        for item in list {
            builder.values().append_value(item);
        }
        builder.append(true);
    }
    Arc::new(builder.finish())
}

/// The rows as one record batch; `index` numbers rows from `first_index`.
pub fn record_batch(rows: &[Instance], first_index: i64) -> anyhow::Result<RecordBatch> {
    let n = rows.len();
    // One user message per prompt: the template already holds every instruction.
    let messages = StructArray::try_new(
        message_fields(),
        vec![
            strings(std::iter::repeat_n("user", n)),
            strings(rows.iter().map(|r| r.prompt.as_str())),
        ],
        None,
    )?;
    let prompt = ListArray::try_new(
        Arc::new(Field::new("item", DataType::Struct(message_fields()), true)),
        OffsetBuffer::from_lengths(std::iter::repeat_n(1, n)),
        Arc::new(messages),
        None,
    )?;
    let reward_model = StructArray::try_new(
        reward_model_fields(),
        vec![
            strings(rows.iter().map(|r| r.ground_truth.as_str())),
            strings(std::iter::repeat_n(REWARD_STYLE, n)),
        ],
        None,
    )?;
    let extra_info = StructArray::try_new(
        extra_info_fields(),
        vec![
            strings(std::iter::repeat_n(SPLIT, n)),
            Arc::new(Int64Array::from_iter_values(
                (0..n as i64).map(|i| first_index + i),
            )),
            strings(std::iter::repeat_n(ABILITY, n)),
            strings(rows.iter().map(|r| r.question_id.as_str())),
            strings(rows.iter().map(|r| r.question.as_str())),
            Arc::new(Int64Array::from_iter_values(
                rows.iter().map(|r| i64::from(r.iteration)),
            )),
            strings(rows.iter().map(|r| r.run.as_str())),
            string_lists(rows.iter().map(|r| r.experience_bank.as_slice())),
            string_lists(rows.iter().map(|r| r.guideline_bank.as_slice())),
            Arc::new(StringArray::from_iter(
                rows.iter().map(|r| r.bank_prompt.as_deref()),
            )),
            // Repeated here because verl hands a reward function `extra_info`, not the
            // row's other columns.
            strings(rows.iter().map(|r| r.source.as_str())),
        ],
        None,
    )?;
    let batch = RecordBatch::try_new(
        schema(),
        vec![
            strings(rows.iter().map(|r| r.data_source.as_str())),
            Arc::new(prompt),
            strings(std::iter::repeat_n(ABILITY, n)),
            Arc::new(reward_model),
            Arc::new(extra_info),
            strings(rows.iter().map(|r| r.source.as_str())),
        ],
    )?;
    Ok(batch)
}

/// Writes `rows` to `path` (through a temporary file renamed into place, so a failed
/// write never leaves a truncated file under the final name).
pub fn write(path: &Path, rows: &[Instance]) -> anyhow::Result<()> {
    let tmp = path.with_extension("parquet.tmp");
    let file = File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .build();
    let mut writer = ArrowWriter::try_new(file, schema(), Some(props))
        .with_context(|| format!("cannot start a parquet writer on {}", tmp.display()))?;
    for (i, chunk) in rows.chunks(ROW_GROUP_ROWS).enumerate() {
        let batch = record_batch(chunk, (i * ROW_GROUP_ROWS) as i64)?;
        writer
            .write(&batch)
            .with_context(|| format!("writing {}", tmp.display()))?;
    }
    let file = writer
        .into_inner()
        .with_context(|| format!("finishing {}", tmp.display()))?;
    file.sync_all()
        .with_context(|| format!("syncing {}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use arrow_array::Array;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use super::*;
    use crate::rl::batch::Source;

    fn instance(source: Source, i: u32) -> Instance {
        Instance {
            source,
            data_source: "tmas:test".into(),
            run: "runs/x".into(),
            question_id: format!("q{i}"),
            question: format!("Question {i}?"),
            ground_truth: format!("{i}"),
            iteration: i,
            prompt: format!("Solve question {i}."),
            bank_prompt: (source == Source::Experience).then(|| format!("Bank {i}")),
            experience_bank: if source == Source::Experience {
                vec!["Anchor: a".into(), "Heuristic: h".into()]
            } else {
                Vec::new()
            },
            guideline_bank: if source == Source::Guideline {
                vec!["induction".into()]
            } else {
                Vec::new()
            },
        }
    }

    #[test]
    fn written_file_reads_back_with_schema_and_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rl.parquet");
        let mut rows = Vec::new();
        for i in 0..1500 {
            let source = Source::ALL[(i % 3) as usize];
            rows.push(instance(source, i));
        }
        write(&path, &rows).unwrap();
        assert!(!dir.path().join("rl.parquet.tmp").exists());

        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
        assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1500);
        let b = &batches[1];
        assert_eq!(b.schema().fields(), schema().fields());
        let extra = b
            .column_by_name("extra_info")
            .unwrap()
            .as_any()
            .downcast_ref::<StructArray>()
            .unwrap();
        let index = extra
            .column_by_name("index")
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(index.value(0), 1024, "indices run on across row groups");
        let source = b
            .column_by_name("_source")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        // Row 1024: 1024 % 3 = 1 → experience.
        assert_eq!(source.value(0), "experience");
        let bank = extra
            .column_by_name("experience_bank")
            .unwrap()
            .as_any()
            .downcast_ref::<ListArray>()
            .unwrap();
        assert_eq!(bank.value(0).len(), 2);
        let bank_prompt = extra
            .column_by_name("bank_prompt")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(bank_prompt.value(0), "Bank 1024");
        assert!(bank_prompt.is_null(1));
        let prompt = b
            .column_by_name("prompt")
            .unwrap()
            .as_any()
            .downcast_ref::<ListArray>()
            .unwrap();
        let first = prompt.value(0);
        let message = first.as_any().downcast_ref::<StructArray>().unwrap();
        let content = message
            .column_by_name("content")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(content.value(0), "Solve question 1024.");
    }
}
